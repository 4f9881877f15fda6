"""A visitor's attention video on a shared server: registry models only, the device's budget and frame cap,
the .npz priced before the run, files in a fresh swept folder, the computation in the visitor's turns of
the heavy lane and, on ZeroGPU, on a lent GPU (`gpu.gpu`) with its progress streamed back.

    mp4, npz, facts = visitor_video("clip.mp4", "mnist_vit", view="head", head=1, npz=True, visitor=v)
"""

from __future__ import annotations

import contextlib
import os

from attention import videos
from attention.config import SETTINGS
from attention.crowd.admission import HEAVY
from attention.crowd.threads import torch_threads
from attention.crowd.visitors import Visitor
from attention.errors import BudgetError
from attention.vit.draw.outputs import OUTPUT_ROOT, new_dir
from attention.vit.engine.video import VideoRun, attention_video, write_video
from attention.vit.models.loader import check_allowed, load_vit
from attention.vit.serve.gpu import VIDEO_GPU_SECONDS, Progress, bar_to, drain, gpu, streamed, zerogpu


def npz_bytes(run: VideoRun) -> int:
    """Bytes of `write_video`'s .npz for `run`: per output frame maps and masks (heads x grid, float32 and bool),
    the mean (grid, float32), time and source index."""
    heads = int(getattr(run.model.blocks[0].attn, "num_heads", 1))
    cells = run.grid[0] * run.grid[1]
    return run.frames * (heads * cells * 5 + cells * 4 + 8)


def check_npz(run: VideoRun, max_mb: float) -> None:
    """BudgetError when `run`'s .npz would be over `max_mb`, naming the frames that fit."""
    size = npz_bytes(run)
    if size > max_mb * 2**20:
        per = size / max(1, run.frames)
        fit = int(max_mb * 2**20 // per)
        raise BudgetError(
            f"The raw maps (.npz) of this video's {run.frames:,} frames would be {size / 2**20:,.0f} MB, over this "
            f"server's {max_mb:g} MB per video. What fits: {fit:,} frames ({fit / float(run.fps):,.1f} s at "
            f"{float(run.fps):g} fps), or the video without the .npz."
        )


def visitor_video(
    video: videos.VideoSource | None,
    model: str,
    *,
    view: str = "mean",
    head: int = 0,
    side_by_side: bool = False,
    npz: bool = False,
    progress: Progress | None = None,
    visitor: Visitor | None = None,
    **options,
) -> tuple[str, str | None, dict]:
    """One visitor's attention video on a shared server: registry models only (`check_allowed`), the
    device's video budget (`SETTINGS.video_budget_gflop`) and frame cap, files in a fresh folder
    swept after ATTENTION_FILE_TTL. options: `attention_video`'s layer, query, resolution, threshold,
    fps, seconds. visitor: who asks: the video is computed in their turns of the heavy lane
    (`attention.crowd.admission.HEAVY`), the slot handed to a waiting visitor between batches of frames and the
    job stopped past ATTENTION_JOB_SECONDS of holding it (on ZeroGPU, where each job is lent its own GPU,
    the turn is held for the whole job). The .npz is priced before the run (ATTENTION_VIDEO_NPZ_MB).
    Returns (mp4 path, npz path or None, facts with the model and device)."""
    if video is None or (isinstance(video, str) and not video.strip()):
        raise videos.VideoError(f"No video: upload one ({videos.ACCEPTED}) or pick an example.")
    with HEAVY.turn(visitor) if visitor is not None and visitor.keys else contextlib.nullcontext() as turn:
        # the hand-over between batches runs in this process; a ZeroGPU worker cannot call back into it
        between = None if turn is None or zerogpu() else (lambda: (turn.check(), turn.pause()))
        return drain(_video_job(video, model, view, head, side_by_side, npz, options, between), progress)


@gpu(duration=VIDEO_GPU_SECONDS)
def _video_job(video, model: str, view: str, head: int, side_by_side: bool, npz: bool, options: dict, between=None):
    """`visitor_video`'s work where the GPU is (ZeroGPU lends one for the call): a generator of its
    progress and then its result (`gpu.streamed`), so its progress reaches the visitor's bar. The work runs in
    `streamed`'s thread, one of the heavy lane's (at ATTENTION_HEAVY_NICE, below the light lane's forwards), with
    its torch threads (ATTENTION_HEAVY_THREADS) on the CPU."""

    def work(progress: Progress) -> tuple:
        with torch_threads(HEAVY.threads):
            return _video_work(video, model, view, head, side_by_side, npz, progress, options, between)

    yield from streamed(work, HEAVY.pool)


def _video_work(video, model: str, view, head, side_by_side, npz, progress: Progress, options: dict, between) -> tuple:
    vit = load_vit(check_allowed(model))
    device = str(next(vit.parameters()).device)
    progress(0.0, f"Checking the video for {model}…")
    run = attention_video(
        vit,
        video,
        max_frames=SETTINGS.video_max_frames,
        max_gflop=SETTINGS.video_budget_gflop(device),
        bar=bar_to(progress),
        **options,
    )
    run.ramp = True  # a visitor sees the first frame's progress after one frame's forward, not a batch's
    run.between = between
    if npz:
        check_npz(run, SETTINGS.video_npz_mb)
    d = new_dir(OUTPUT_ROOT / "videos")
    mp4, maps = d / "attention.mp4", (d / "attention_maps.npz" if npz else None)
    facts = write_video(run, mp4, view=view, head=head, side_by_side=side_by_side, npz=maps, model_name=model.strip())
    return os.fspath(mp4), maps and os.fspath(maps), {"model": model.strip(), "device": device, **facts}
