"""Attention videos: every frame of a video through a ViT, in batches of frames, one forward each.

DINO's video_generation.py runs one frame at a time (heads x N^2 per layer: out of memory for 720x1280 at patch 8).
Here frames of one size go through the engine together (its O(N) rows), each decoded frame once; the whole run is
priced before it starts (refused with the largest length, rate or size that fits); the result is an H.264 MP4 of the
chosen view over the frames, plus the raw maps on request.

    run = attention_video(model, "clip.mp4", layer=-1, fps=10, max_gflop=6000)   # checks, no forward
    for f in run:                       # VideoFrameMaps, in order; one forward per batch of frames
        f.maps, f.mean, f.masks         # (H, gh, gw) float32, (gh, gw), (H, gh, gw) bool
        f.picture("fig3")               # uint8 (H', W', 3): DINO Fig. 3's colours over the frame
    facts = write_video(run, "out.mp4", view="mean", side_by_side=True, npz="maps.npz")
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from functools import partial

import numpy as np
import torch
from tqdm.auto import tqdm

from attention import videos
from attention.config import SETTINGS
from attention.errors import BudgetError, InputError
from attention.images import patch_tokens, target_size
from attention.npzfile import save_npz
from attention.render import colormap
from attention.validate import check_seconds, layer_index
from attention.vit.backbone import describe
from attention.vit.engine.batch import batch_maps
from attention.vit.engine.cost import forward_gflop, largest_resolution
from attention.vit.engine.extract import Query, norm_query
from attention.vit.engine.preprocess import Preprocess
from attention.vit.engine.query import default as default_query
from attention.vit.engine.query import index as query_index
from attention.vit.engine.query import tokens_of
from attention.vit.engine.request import CMAP, LAYER, OPACITY, RESOLUTION, THRESHOLD
from attention.vit.engine.video_frames import (  # noqa: F401  (VIDEO_VIEWS, STACKED: read through this module too)
    MIN_SIDE,
    STACKED,
    VIDEO_AXES,
    VIDEO_UNITS,
    VIDEO_VIEWS,
    VideoFrameMaps,
    check_head,
    check_video_view,
)  # fmt: skip

BATCH = 8  # frames per forward


@dataclass
class VideoRun:
    """A priced, checked attention video, not yet computed: iterate it for VideoFrameMaps."""

    model: torch.nn.Module
    source: str
    info: videos.VideoInfo
    fps: Fraction
    seconds: float | None
    frames: int  # output frames planned from the headers
    forwards: int  # source frames planned through the model (at most `frames`)
    resolution: int | str | None
    grid: tuple[int, int]
    gflop: float  # estimate of the whole run
    layer: int
    query: Query
    threshold: float
    batch_size: int = BATCH
    max_frames: int = SETTINGS.video_max_frames
    max_gflop: float | None = None  # enforced while running too: a stream can hold more than its headers say
    bar: Callable[..., tqdm] | None = None  # the progress: a tqdm class (None: tqdm's, shown on a terminal only)
    seconds_forward: float = 0.0  # measured during the last iteration: forwards only
    prep: Preprocess | None = None  # the frames' preprocessing (built once, by `attention_video`)
    ramp: bool = False  # batches of 1, 2, 4, ... up to `batch_size`: the first frame's progress comes at once
    between: Callable[[], None] | None = None  # called between batches (a shared slot's check and hand-over)

    def __iter__(self) -> Iterator[VideoFrameMaps]:
        """Run each `batch_size` distinct decoded frames (one grid) through one forward; yield each output frame."""
        prep = self.prep or Preprocess.of(self.model, self.resolution)
        self.seconds_forward = 0.0
        pending: list[videos.Frame] = []
        kept: dict[int, tuple] = {}  # the last batch's last source frame, its maps and picture: its repeats
        done = forwards = 0  # in the next batch (an output rate above the source's) are not run again
        per_frame = self.gflop / max(1, self.forwards)
        size = 1 if self.ramp else self.batch_size  # the batch now
        bar = (self.bar or partial(tqdm, disable=None))(total=self.frames, unit="frame", desc="frames")

        def flush() -> Iterator[VideoFrameMaps]:
            nonlocal done, forwards, kept
            uniq: dict[int, int] = {}
            items = []
            for fr in pending:
                if fr.source_index not in uniq and fr.source_index not in kept:
                    uniq[fr.source_index] = len(items)
                    items.append(prep(fr.rgb))
            forwards += len(items)  # each decoded source frame once
            if self.max_gflop is not None and forwards * per_frame > self.max_gflop:
                raise BudgetError(
                    f"This video holds more frames than its headers said: {forwards:,} frames so far, over this "
                    f"server's budget of {self.max_gflop:,.0f} GFLOP per video; accepted: a shorter length or a "
                    "lower frame rate."
                )
            t0 = time.perf_counter()
            x = torch.stack([p.x for p in items]) if items else None  # none: every frame shows the kept one
            maps = [] if x is None else batch_maps(self.model, x, layer=self.layer, query=self.query)
            self.seconds_forward += time.perf_counter() - t0
            ran = {i: (maps[j], items[j].shown) for i, j in uniq.items()} | kept
            for fr in pending:
                m, shown = ran[fr.source_index]
                yield VideoFrameMaps(fr.index, fr.time, fr.source_index, m, shown, self.threshold)
                done += 1
                bar.update(1)  # each frame, as it is drawn
            kept = {pending[-1].source_index: ran[pending[-1].source_index]}
            pending.clear()
            if self.between is not None:
                self.between()

        frames = videos.frames(
            self.source, fps=self.fps, seconds=self.seconds, max_frames=self.max_frames, info=self.info
        )
        for fr in frames:
            pending.append(fr)
            if len({f.source_index for f in pending}) >= size:
                yield from flush()
                size = min(self.batch_size, 2 * size)
        if pending:
            yield from flush()
        bar.close()

    def facts(self) -> dict:
        """JSON-ready facts of the run: the source, the plan, the model's grid and the estimate."""
        return {
            "source": self.info.facts(),
            "fps": round(float(self.fps), 3),
            "frames_planned": self.frames,
            "forwards_planned": self.forwards,
            "grid": list(self.grid),
            "layer": self.layer,
            "query": self.query if isinstance(self.query, str) else list(self.query),
            "threshold": self.threshold,
            "batch_size": self.batch_size,
            "gflop_estimate": round(self.gflop, 1),
        }


def attention_video(
    model: torch.nn.Module,
    video: videos.VideoSource,
    *,
    layer: int = LAYER,
    query: Query = "cls",
    resolution: int | str | None = RESOLUTION,
    threshold: float = THRESHOLD.default,
    fps: float | None = None,
    seconds: float | None = None,
    batch_size: int = BATCH,
    max_frames: int = SETTINGS.video_max_frames,
    max_gflop: float | None = None,
    bar: Callable[..., tqdm] | None = None,
) -> VideoRun:
    """Check and price an attention video of `video` (a path) through `model`; iterate the result
    for each output frame's maps (`VideoFrameMaps`), computed `batch_size` source frames per forward.

    fps: output frames per second (None: the source's; a frame is the one on screen at its time).
    seconds: only the first `seconds` of the video. resolution, layer, query: as `attention_maps`
    (every frame is preprocessed exactly as `attention_maps` would preprocess it alone).
    Raises at once, before any forward: VideoError (not a video, no frames, corrupt), BudgetError
    when the frames are more than `max_frames` or their estimated compute is over `max_gflop`
    (the message names the longest length, the lowest rate and the largest resolution that fit),
    InputError for bad layer, query, threshold or batch size. bar: the progress, a tqdm class made with
    (total=frames, unit, desc) and advanced once per frame as it is computed (None: tqdm's, on a terminal only).
    """
    info = videos.probe(video)
    rate = videos.check_fps(fps, info)
    seconds = check_seconds(seconds)
    if not (isinstance(batch_size, int) and 1 <= batch_size <= 256):
        raise InputError(f"Batch size {batch_size!r} is out of range; accepted: 1 to 256 frames.")
    threshold = THRESHOLD.check(threshold)
    bb = describe(model)
    patch = bb.patch_size
    prep = Preprocess.of(model, resolution)
    res, crop = prep.resolution, prep.crop  # "auto": the model's (480 px for DINO); the family's crop rule
    size = (info.width, info.height)
    if min(size) < patch:
        raise videos.VideoError(f"Frames are {size[0]}x{size[1]} px, smaller than one {patch}x{patch} patch.")
    _, (cw, ch) = target_size(size, patch, res, crop, prep.resize)  # type: ignore[arg-type]
    grid = (ch // patch, cw // patch)
    n_layers = bb.depth
    layer = layer_index(layer, n_layers)
    names, pool = bb.prefix, bb.pool
    query = norm_query(query)
    # None: the model's own, as attention_maps (CLS, else the pool's query, else the centre patch)
    query = default_query(tokens_of(model), grid) if query is None else query
    query_index(query, grid, names, pool)  # off the grid or not a token: InputError now
    frames = videos.planned_frames(info, rate, seconds)
    length, span = frames / float(rate), videos.asked_seconds(info, seconds)  # output frames' time; source's
    decoded = max(1, math.ceil(span * float(info.fps) - 1e-9))  # every source frame in the part asked for
    forwards = min(frames, decoded)  # each run once, however many output frames show it
    per_frame = forward_gflop(model, patch_tokens(size, patch, res, crop, prep.resize))  # type: ignore[arg-type]
    name = getattr(model, "alias", "this model")
    if frames > max_frames:
        raise BudgetError(
            f"This video makes {frames:,} frames at {float(rate):g} fps ({length:,.0f} s), over this server's cap of "
            f"{max_frames:,} frames per video. What fits: the first {max_frames / float(rate):,.1f} s at "
            f"{float(rate):g} fps{_rate_fits(max_frames / length)}."
        )
    canvas, limit = info.source_size[0] * info.source_size[1], videos.DECODE.gpixels * 1e9
    decoded += seconds is not None and seconds < span + 1e-9  # decoding stops at the frame after the part: one more
    if decoded * canvas > limit:  # the first s seconds decode ceil(s * fps) + 1 frames: those fit in the message
        fit = max(0.0, (limit // canvas - 1) / float(info.fps))
        raise BudgetError(
            f"This video decodes {decoded:,} frames of {info.source_size[0]}x{info.source_size[1]} px: "
            f"{decoded * canvas / 1e9:,.1f} billion pixels, over this server's {videos.DECODE.gpixels:g} billion per "
            f"video (every source frame in the part asked for is decoded, whatever the frame rate). What fits: "
            f"the first {fit:,.1f} s."
        )
    gflop = forwards * per_frame
    if max_gflop is not None and gflop > max_gflop:
        fit_frames = int(max_gflop // per_frame)  # forwards; a second holds min(rate, source fps) of them
        best = largest_resolution(model, size, max_gflop / forwards)
        sizes = f", or a resolution up to {best} px for the whole video" if best else ", or a smaller model"
        raise BudgetError(
            f"This video makes {forwards:,} frames of {grid[0]}x{grid[1]} patches: about {gflop:,.0f} GFLOP through "
            f"{name}, over this server's budget of {max_gflop:,.0f} GFLOP per video. What fits: the first "
            f"{fit_frames / min(float(rate), float(info.fps)):,.1f} s{_rate_fits(fit_frames / length)}{sizes}."
        )
    return VideoRun(
        model, os.fspath(video), info, rate, seconds, frames, forwards, res, grid, gflop, layer, query, threshold,
        batch_size, max_frames, max_gflop, bar, prep=prep,
    )  # fmt: skip


def _rate_fits(fps: float) -> str:
    """ ", or F fps over the whole video" when F is an accepted rate (0.1 fps or more), else ""."""
    return f", or {fps:.3g} fps over the whole video" if fps >= 0.1 else ""


def write_video(
    run: VideoRun,
    out: str | os.PathLike,
    *,
    view: str = "mean",
    head: int = 0,
    alpha: float = OPACITY.default,
    cmap: str = CMAP.default,
    side_by_side: bool | str = False,
    npz: str | os.PathLike | None = None,
    model_name: str | None = None,
) -> dict:
    """Compute `run` and write it: an H.264 MP4 at `out` of `view` over each frame (`side_by_side`:
    the frame on the left; "stacked": the frame above), and with `npz` the raw maps of every output
    frame: maps (T, H, gh, gw) float32, mean (T, gh, gw), masks (T, H, gh, gw) bool, time (T,) s,
    source_index (T,), and fps, layer, query (-1, -1 = a token), threshold, patch_size, grid, and the common
    `meta` (`attention.npzfile`; its model is `model_name`, its axes and units `VIDEO_AXES`/`UNITS`). Returns the
    run's facts with the output's frames, fps, size and timings."""
    view = check_video_view(view)  # checked once for the whole video, the head too
    if view in ("head", "masks"):
        head = check_head(head, describe(run.model).heads)
    alpha = OPACITY.check(alpha)
    colormap(cmap)
    kept: dict[str, list] = {"maps": [], "mean": [], "masks": [], "time": [], "source_index": []}
    size: list[int] = []
    t0 = time.perf_counter()

    def pictures() -> Iterator[np.ndarray]:
        for f in run:
            for k in kept if npz is not None else ():  # maps, mean, masks, time, source_index
                kept[k].append(getattr(f, k))
            pic = f.drawn(view, head=head, alpha=alpha, cmap=cmap, side_by_side=side_by_side)
            size[:] = [pic.shape[1] + pic.shape[1] % 2, pic.shape[0] + pic.shape[0] % 2]
            yield pic

    n = videos.write_mp4(out, pictures(), run.fps)
    if npz is not None:
        q = (-1, -1) if isinstance(run.query, str) else run.query  # a token (CLS, pool, a register): -1, -1
        arrays = {k: np.stack(kept[k]).astype(np.float32) for k in ("maps", "mean")}
        arrays |= {"masks": np.stack(kept["masks"]), "time": np.array(kept["time"], np.float32)}
        arrays |= {"source_index": np.array(kept["source_index"], np.int32), "fps": np.array(run.fps, np.float32)}
        arrays |= {"layer": np.array(run.layer, np.int32), "query": np.array(q, np.int32)}
        arrays |= {"threshold": np.array(run.threshold, np.float32), "grid": np.array(run.grid, np.int32)}
        arrays["patch_size"] = np.array(describe(run.model).patch_size, np.int32)
        meta = {"kind": "video", "model": model_name, "layer": run.layer, "query": run.facts()["query"]}
        meta |= {"grid": list(run.grid), "view": view, "axes": VIDEO_AXES, "units": VIDEO_UNITS}
        save_npz(npz, arrays, meta=meta)
    return {
        **run.facts(),
        "view": view,
        "side_by_side": bool(side_by_side),
        "output": {"frames": n, "fps": round(float(run.fps), 3), "width": size[0], "height": size[1]},
        "forward_s": round(run.seconds_forward, 3),
        "total_s": round(time.perf_counter() - t0, 3),
    }
