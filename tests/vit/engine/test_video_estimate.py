"""The video cost estimate (attention/vit/engine/video_estimate.py): its plan is the run's own, its seconds
follow the work, and the costly run of issue 37 (the cat clip at its native size through mnist_vit)
asks for confirmation while the examples do not. Estimate vs measured time: bench/bench_video_estimate.py."""

from __future__ import annotations

import pytest

from attention.errors import BudgetError
from attention.vit.engine import video_estimate
from attention.vit.engine.video import attention_video
from attention.vit.models.loader import load_vit
from tests.conftest import ROOT

CAT, DIGITS = ROOT / "examples" / "videos" / "chelsea.mp4", ROOT / "examples" / "videos" / "digits.mp4"


@pytest.fixture(scope="module")
def mnist():
    return load_vit("mnist_vit")


def test_the_plan_is_the_runs_own(mnist):
    est = video_estimate.estimate(mnist, CAT, resolution="native", seconds=1.0)
    run = attention_video(mnist, CAT, resolution="native", seconds=1.0)
    assert (est.frames, est.forwards, est.grid, est.gflop) == (run.frames, run.forwards, run.grid, run.gflop)
    assert (est.frames, est.grid) == (10, (90, 120))  # 480x360 px at patch 4
    assert "10 frames · grid 90×120 patches" in est.text() and "on this server" in est.text()


def test_the_seconds_follow_the_work_and_the_costly_run_asks_first(mnist):
    small = video_estimate.estimate(mnist, DIGITS, resolution="56", side_by_side=True)
    cheap = video_estimate.estimate(mnist, CAT, resolution="auto")
    costly = video_estimate.estimate(mnist, CAT, resolution="native")
    assert not small.needs_confirmation and not cheap.needs_confirmation
    assert costly.needs_confirmation and costly.seconds > 10 * cheap.seconds
    speed = video_estimate.measured_speed(mnist)
    assert speed.s_per_gflop > 0 and speed.s_per_forward >= 0 and speed.s_per_pixel > 0
    assert video_estimate.measured_speed(mnist) is speed  # measured once per model


def test_a_run_over_the_budget_is_refused_by_the_estimate_too(mnist):
    with pytest.raises(BudgetError, match="over this server's budget"):
        video_estimate.estimate(mnist, CAT, resolution="native", max_gflop=100)
