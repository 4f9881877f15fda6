"""Spec of attention.net: offline switches answer at once; a reachability probe is one short
connect whose answer is remembered for a while, then asked again."""

from __future__ import annotations

import pytest

from attention import net


@pytest.mark.parametrize("ours, hubs, expected", [(True, False, True), (False, True, True), (False, False, False)])
def test_offline_when_either_switch_is_on(offline_switches, ours, hubs, expected):
    offline_switches(attention=ours, hub=hubs)
    assert net.offline() is expected


def test_reachable_probes_once_per_ttl(monkeypatch):
    probes = []

    def connect(addr, timeout):
        probes.append((addr, timeout))
        raise OSError("no route")

    clock = [100.0]
    monkeypatch.setattr(net, "_seen", {})
    monkeypatch.setattr(net.socket, "create_connection", connect)
    monkeypatch.setattr(net.time, "monotonic", lambda: clock[0])
    assert not net.reachable("example.invalid", 443, timeout=0.5, ttl=60)
    clock[0] += 59
    assert not net.reachable("example.invalid", 443, timeout=0.5, ttl=60)
    assert probes == [(("example.invalid", 443), 0.5)]  # remembered
    clock[0] += 2
    net.reachable("example.invalid", 443, timeout=0.5, ttl=60)
    assert len(probes) == 2  # expired: asked again
