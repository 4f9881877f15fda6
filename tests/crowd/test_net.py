"""Spec of attention.crowd.net: offline switches answer at once; a reachability probe is one short
connect whose answer is remembered for a while, then asked again."""

from __future__ import annotations

import pytest
from cachetools import TTLCache

from attention.crowd import net


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
    monkeypatch.setattr(net, "_seen", TTLCache(maxsize=16, ttl=net.REMEMBER, timer=lambda: clock[0]))
    monkeypatch.setattr(net.socket, "create_connection", connect)
    assert not net.reachable("example.invalid", 443, timeout=0.5)
    clock[0] += net.REMEMBER - 1
    assert not net.reachable("example.invalid", 443, timeout=0.5)
    assert probes == [(("example.invalid", 443), 0.5)]  # remembered
    clock[0] += 2
    net.reachable("example.invalid", 443, timeout=0.5)
    assert len(probes) == 2  # expired: asked again


def test_the_remembered_answers_are_bounded(monkeypatch):
    def connect(addr, timeout):
        raise OSError("no route")

    monkeypatch.setattr(net.socket, "create_connection", connect)
    net.forget()
    try:
        for i in range(3 * 16):
            net.reachable(f"host{i}.invalid", 443, timeout=0.5)
        assert len(net._seen) == 16  # the stated bound: the oldest answers went first
        assert ("host0.invalid", 443) not in net._seen and ("host47.invalid", 443) in net._seen
    finally:
        net.forget()
