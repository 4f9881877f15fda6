"""Spec of attention.vit.serve.rollouts: a visitor's rollout is priced before it runs; over the heavy jobs'
budget it is refused with nothing computed; over ATTENTION_ROLLOUT_LIGHT_GFLOP it is computed in the heavy
lane (in the visitor's turn, in the lane's threads), never in the asking thread; a small or memoised one is
answered where it is asked. Runs offline on the shipped mnist_vit."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from pathlib import Path

import pytest

from attention.crowd.admission import Lane
from attention.crowd.visitors import Visitor
from attention.errors import BudgetError
from attention.vit.draw.frames import ViewSpec
from attention.vit.engine.cost import rollout_gflop
from attention.vit.serve import passes, rollouts

DIGIT = Path(__file__).resolve().parents[3] / "examples" / "digits" / "digit_3.png"
ROLL = ViewSpec(view="rollout", rollout_options={"head_fusion": "max", "discard_ratio": 0.5, "discard": "global"})


def _settings(monkeypatch, **changes) -> None:
    monkeypatch.setattr(rollouts, "SETTINGS", dataclasses.replace(rollouts.SETTINGS, **changes))


@pytest.fixture
def computed(monkeypatch):
    """The threads `Pass.rollout` computed a rollout in (`flow.rollout_map`, as the memo calls it)."""
    from attention.vit.serve import pass_memo

    threads, real = [], pass_memo.rollout_map

    def recording(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(pass_memo, "rollout_map", recording)
    return threads


def test_the_price_counts_every_head_entry_of_every_layer_up_to_the_one_shown():
    p = passes.get_pass(str(DIGIT), "mnist_vit", "auto")
    H, N, d = p.base.qk[0][0].shape
    assert rollouts.price(p, ViewSpec(view="heads")) == 0.0
    assert rollouts.price(p, ROLL) == pytest.approx(rollout_gflop(p.num_layers, H, N, H * d, "global", 0.5))
    assert p.rollout_gflop(layer=0) == pytest.approx(p.rollout_gflop() / p.num_layers)  # layers 0..l only
    assert rollout_gflop(4, 4, 2 * N, 64) == pytest.approx(4 * rollout_gflop(4, 4, N, 64))  # quadratic in tokens
    price = [rollout_gflop(4, 4, N, 64, rule, ratio) for rule, ratio in (("global", 0.9), ("row", 0.9), ("row", 0))]
    assert price[0] > price[1] > price[2]  # discarding costs more, vit-explain's whole-matrix cut most
    p.rollout(**ROLL.rollout_options)
    assert rollouts.price(p, ROLL) == 0.0  # memoised: nothing left to compute


def test_a_small_rollout_is_computed_where_it_is_asked(monkeypatch, computed):
    _settings(monkeypatch, rollout_light_gflop=1e9)
    p = passes.get_pass(str(DIGIT), "mnist_vit", "auto")
    rollouts.ready(p, ROLL, Visitor("s", "10.1.0.1"))
    assert computed == [threading.current_thread().name] and p.has_rollout(**ROLL.rollout_options)


def test_a_heavy_rollout_waits_for_the_visitors_turn_and_runs_in_the_lanes_thread(monkeypatch, computed):
    _settings(monkeypatch, rollout_light_gflop=0.0)
    lane = Lane("test heavy", slots=1, queued=2, nice=5)
    p = passes.get_pass(str(DIGIT), "mnist_vit", "auto")
    done = threading.Event()
    asker = threading.Thread(target=lambda: (rollouts.ready(p, ROLL, Visitor("s", "10.1.0.2"), lane), done.set()))
    with lane.turn(Visitor("other", "10.1.0.3")):  # the lane's one slot held by another visitor
        asker.start()
        assert not done.wait(0.5), "the heavy rollout ran without a turn in its lane"
        assert computed == []
    assert done.wait(30)
    asker.join()
    assert len(computed) == 1 and computed[0] != asker.name and p.has_rollout(**ROLL.rollout_options)
    assert lane.waiting() == 0


def test_a_visitor_over_their_share_of_the_lane_is_refused_at_once(monkeypatch, computed):
    from attention.crowd.visitors import Busy

    _settings(monkeypatch, rollout_light_gflop=0.0)
    lane = Lane("test heavy", slots=1, queued=0)
    p = passes.get_pass(str(DIGIT), "mnist_vit", "auto")
    me = Visitor("s", "10.1.0.4")
    with lane.turn(me), pytest.raises(Busy, match="Not queued"):
        rollouts.ready(p, ROLL, me, lane)  # one job running already
    assert computed == []


def test_a_rollout_over_the_heavy_budget_is_refused_before_it_runs(monkeypatch, computed):
    _settings(monkeypatch, relevance_gflop_cpu=1e-6)
    p = passes.get_pass(str(DIGIT), "mnist_vit", "auto")
    with contextlib.ExitStack(), pytest.raises(BudgetError, match=r"budget of 0 GFLOP per heavy job on cpu; accepted"):
        rollouts.ready(p, ROLL, Visitor("s", "10.1.0.5"))
    assert computed == [] and not p.has_rollout(**ROLL.rollout_options)
