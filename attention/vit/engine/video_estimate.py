"""How long an attention video will take on this machine, said before it runs.

The plan of a run (`video.attention_video`: frames, forwards, grid, GFLOP from `cost.forward_gflop`,
no forward) is turned into seconds with this machine's speed (`Speed`), measured once per model and
process (`measured_speed`: two forwards of the model at two token counts, and the drawing and the
encoding of a few frames, about a second in all):

    seconds = batches x per-forward overhead + GFLOP x seconds per GFLOP + output pixels x seconds per pixel
              + frames x seconds to decode and preprocess one frame of this video

(a batch: `VideoRun.batch_size` source frames through one forward; the last term timed on the video's
own first frames, a few milliseconds each).

bench/bench_video_estimate.py prints this estimate beside the measured time for three clips and settings.

    est = estimate(model, "clip.mp4", resolution="auto", fps=None, seconds=None, side_by_side=True)
    est.seconds, est.frames, est.grid, est.text()
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time
from dataclasses import dataclass

import numpy as np
import torch

from attention.render import MIN_SIDE, enlargement
from attention.vit.engine.batch import batch_maps
from attention.vit.engine.cost import dims, forward_gflop
from attention.vit.engine.video import VideoRun, attention_video

CONFIRM_S = 20.0  # seconds: a longer run asks the visitor to confirm first


@dataclass(frozen=True)
class Speed:
    """This machine's speed for one model: seconds per GFLOP of its forwards, seconds of overhead per
    forward (the layers' fixed costs, whatever the tokens), seconds per output pixel drawn and encoded."""

    s_per_gflop: float
    s_per_forward: float
    s_per_pixel: float


def _time(fn, repeat: int = 2) -> float:
    """The least of `repeat` timings of `fn()` (seconds), after one untimed call."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _measure(model: torch.nn.Module) -> Speed:
    """Two forwards of `model` (a small and a large token count: the overhead and the slope) and the
    drawing plus encoding of a few frames, timed here."""
    from attention.render import overlay
    from attention.videos import write_mp4

    p = dims(model)[4]
    small = 4  # patches a side: 16 tokens (the overhead); the slope from a forward of about 3 GFLOP
    large = next((n for n in range(8, 96, 4) if forward_gflop(model, n * n) >= 3.0), 96)
    c = model.patch_embed.proj.in_channels  # 1 for a grey model (mnist_vit)
    x_small, x_large = (torch.rand(1, c, n * p, n * p) for n in (small, large))
    t_small = _time(lambda: batch_maps(model, x_small, layer=-1, query="cls"))
    t_large = _time(lambda: batch_maps(model, x_large, layer=-1, query="cls"), repeat=3)
    g_small, g_large = forward_gflop(model, small * small), forward_gflop(model, large * large)
    s_per_gflop = max(1e-6, (t_large - t_small) / max(1e-9, g_large - g_small))
    s_per_forward = max(0.0, t_small - g_small * s_per_gflop)
    frame = np.random.default_rng(0).integers(0, 255, (MIN_SIDE, 2 * MIN_SIDE, 3), np.uint8)
    heat = np.random.default_rng(1).random((14, 28)).astype(np.float32)
    n = 6
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "calibration.mp4")
        t = _time(lambda: write_mp4(out, (overlay(frame, heat) for _ in range(n)), 10), repeat=1)
    return Speed(s_per_gflop, s_per_forward, t / (n * frame.shape[0] * frame.shape[1]))


_MEASURING: dict[tuple[str, int], Speed] = {}


def measured_speed(model: torch.nn.Module) -> Speed:
    """`model`'s speed on this machine (`_measure`), measured once per model per process."""
    key = (getattr(model, "alias", type(model).__name__), id(model))
    if key not in _MEASURING:
        if len(_MEASURING) >= 32:  # bounded: the registry's models, each once
            _MEASURING.clear()
        _MEASURING[key] = _measure(model)
    return _MEASURING[key]


def output_pixels(run: VideoRun, side_by_side: bool) -> int:
    """Pixels of one output frame: the preprocessed frame (grid x patch), enlarged by a whole factor
    to MIN_SIDE (`VideoFrameMaps.picture`), twice as wide side by side."""
    p = dims(run.model)[4]
    h, w = run.grid[0] * p, run.grid[1] * p
    s = enlargement((w, h), MIN_SIDE)
    return (h * s) * (w * s) * (2 if side_by_side else 1)


@dataclass(frozen=True)
class Estimate:
    """A run's plan and its predicted seconds on this machine."""

    frames: int
    forwards: int
    grid: tuple[int, int]
    gflop: float
    seconds: float

    @property
    def needs_confirmation(self) -> bool:
        return self.seconds > CONFIRM_S

    def text(self) -> str:
        """One line for the visitor: frames, grid, GFLOP and the seconds on this machine."""
        s = f"{self.seconds:,.0f} s" if self.seconds >= 1.5 else "1 s"
        return (
            f"{self.frames:,} frames · grid {self.grid[0]}×{self.grid[1]} patches · {self.gflop:,.0f} GFLOP · "
            f"about {s} on this server"
        )


def decode_seconds(run: VideoRun, n: int = 3) -> float:
    """Seconds to decode and preprocess one frame of `run`'s video: the least of its first `n`, timed."""
    from attention import videos
    from attention.vit.engine.preprocess import Preprocess

    prep, best = Preprocess.of(run.model, run.resolution), float("inf")
    t0 = time.perf_counter()
    decoded = videos.frames(run.source, fps=run.fps, seconds=run.seconds, max_frames=run.max_frames)
    for fr in itertools.islice(decoded, n):
        prep(fr.rgb)
        best, t0 = min(best, time.perf_counter() - t0), time.perf_counter()
    return 0.0 if best == float("inf") else best


def seconds_of(run: VideoRun, speed: Speed, side_by_side: bool, per_frame: float = 0.0) -> float:
    """Predicted seconds of `run` (`Speed`'s formula, module doc); `per_frame`: decode_seconds."""
    return (
        -(-run.forwards // run.batch_size) * speed.s_per_forward
        + run.gflop * speed.s_per_gflop
        + run.frames * (output_pixels(run, side_by_side) * speed.s_per_pixel + per_frame)
    )


def estimate(model: torch.nn.Module, video, *, side_by_side: bool = False, **options) -> Estimate:
    """The plan and predicted seconds of `attention_video(model, video, **options)` (its checks and
    refusals too: BudgetError, VideoError, InputError), without running a forward of the video."""
    run = attention_video(model, video, **options)
    secs = seconds_of(run, measured_speed(model), side_by_side, decode_seconds(run))
    return Estimate(run.frames, run.forwards, run.grid, run.gflop, secs)
