"""Spec of attention.net: offline switches answer at once; a reachability probe is one short
connect whose answer is remembered for a while, then asked again."""

from __future__ import annotations

import pytest

from attention import net


@pytest.mark.parametrize("var", ["ATTENTION_OFFLINE", "HF_HUB_OFFLINE"])
@pytest.mark.parametrize("value, expected", [("1", True), ("true", True), ("YES", True), ("0", False), ("", False)])
def test_offline_switches(monkeypatch, var, value, expected):
    monkeypatch.delenv("ATTENTION_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv(var, value)
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
