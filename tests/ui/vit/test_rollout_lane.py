"""Spec of where /attention_maps computes a rollout on the launched app (issue 49): a heavy rollout waits for
its visitor's turn in the heavy lane, not in the light endpoint's workers, so a flood of rollouts from one
address (two sessions) leaves another visitor's maps within 3x their quiet time. Cheap: the heavy lane's
slots are held by the test, so the flood's rollouts wait (they never compute while the visitor is timed)."""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time

from gradio_client import handle_file

from attention.crowd.admission import HEAVY
from attention.crowd.visitors import Visitor
from attention.vit.serve import rollouts
from tests.conftest import DIGIT


def _maps(client, **kw):
    return client.submit(handle_file(DIGIT), model="mnist_vit", api_name="/attention_maps", **kw)


def test_a_rollout_flood_from_one_address_leaves_another_visitors_maps_within_3x_quiet(visitor_client, monkeypatch):
    flood = [visitor_client(41), visitor_client(41)]  # two sessions of one address: one visitor
    honest = visitor_client(42)
    for c in flood:  # each session's pass kept (a light rollout): the flood's calls below need no forward
        _maps(c, view="rollout", layer=0).result(timeout=120)
    quiet = statistics.median(_timed(honest) for _ in range(3))
    monkeypatch.setattr(rollouts, "SETTINGS", dataclasses.replace(rollouts.SETTINGS, rollout_light_gflop=0.0))
    with contextlib.ExitStack() as held:
        for i in range(HEAVY.slots):  # the heavy lane busy with others' jobs: the flood's rollouts wait there
            held.enter_context(HEAVY.turn(Visitor(f"holder{i}", f"10.9.8.{i}")))
        jobs = [_maps(c, view="rollout", layer=-1, head_fusion="max") for c in flood]
        deadline = time.monotonic() + 60
        while HEAVY.waiting() < 1 and time.monotonic() < deadline:  # the address's other job waits its turn in
            time.sleep(0.05)  # Gradio's queue (issue 48's fair queue) or beside it in the lane, by how they arrive
        assert HEAVY.waiting() >= 1, "the flood's rollouts are not waiting in the heavy lane"
        during = [_timed(honest, timeout=max(10 * quiet, 20)) for _ in range(3)]
        assert not any(j.done() for j in jobs), "a heavy rollout was computed outside the heavy lane"
    assert max(during) <= max(3 * quiet, 1.0), (during, quiet)  # 1 s: the floor of a noisy shared machine
    for j in jobs:
        _, npz, info = j.result(timeout=120)
        assert info["view"] == "rollout"


def _timed(client, timeout: float = 120) -> float:
    t0 = time.monotonic()
    _maps(client, view="heads").result(timeout=timeout)
    return time.monotonic() - t0
