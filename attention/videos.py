"""Videos in and out with PyAV (FFmpeg's libraries): probe, decode to RGB frames at a constant rate,
encode H.264 MP4 that every browser plays. Never by hand; audio is dropped.

    info = probe("clip.mp4")                       # VideoInfo: size as displayed, fps, duration, ...
    for f in frames("clip.mp4", fps=10):           # Frame(index, time, source_index, rgb (H, W, 3) uint8)
        ...
    write_mp4("out.mp4", pictures, fps=10)         # H.264 (yuv420p, +faststart), sizes padded to even

Frames come out at a constant rate, `fps` (the source's average rate when None): output frame k
is the source frame on screen at time k / fps, so a variable-frame-rate phone clip or a GIF (each
frame with its own duration) gives a regular, correctly timed sequence, and a lower `fps` drops
frames rather than slowing the clip. Rotation metadata (the display matrix) is applied, frames
larger than `SETTINGS.video_max_pixels` are scaled down while decoding (aspect kept), and a
stream whose frames change size mid-way is scaled to its first frame's size.

Decoding is priced and bounded as computing is: a frame's decoded size is its container's canvas (an
animated GIF's logical screen, whatever its frames cover), checked from the headers before the first
frame is decoded (`decode_pixels`, ATTENTION_VIDEO_DECODE_PIXELS); the pixels decoded for one video
(frames x canvas, `decode_gpixels`) and the seconds spent decoding (`decode_seconds`) are checked before
(from the headers) and while decoding. Only the frames used are converted to RGB. Only container
formats that hold their own frames are opened (`video_container.FORMATS`): playlists (.m3u8), concat lists and other
files that name other files are refused, and FFmpeg reads only the file given (its protocol whitelist).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from attention.config import SETTINGS
from attention.errors import AttentionError, BudgetError, VideoError
from attention.video_container import (
    ACCEPTED,
    DECODE,
    DecodeLimits,
    VideoSource,
    check_canvas,
    open_video,
    rotation,
    scaled_size,
    stream_rate,
)

MAX_PIXELS = SETTINGS.video_max_pixels  # ATTENTION_VIDEO_MAX_PIXELS


@dataclass(frozen=True)
class VideoInfo:
    """What a video's headers say, as displayed: size after rotation and the decode cap."""

    width: int  # px, as decoded and displayed (rotation applied, scaled to MAX_PIXELS at most)
    height: int
    fps: Fraction  # the stream's average frame rate (guessed when the container has none)
    duration: float  # seconds; 0.0 when the container does not say
    frames: int  # source frames the headers announce (estimated from duration x fps when absent)
    rotation: int  # degrees counter-clockwise applied to each decoded frame (0, 90, 180, 270)
    codec: str
    source_size: tuple[int, int]  # (W, H) as stored in the stream, before rotation and scaling

    @property
    def scaled(self) -> bool:
        """Whether frames are scaled down while decoding (over MAX_PIXELS)."""
        w, h = self.source_size
        return (self.width, self.height) not in ((w, h), (h, w))

    def facts(self) -> dict:
        return {
            "width": self.width,
            "height": self.height,
            "fps": round(float(self.fps), 3),
            "duration_s": round(self.duration, 3),
            "frames": self.frames,
            "rotation": self.rotation,
            "codec": self.codec,
            "source_size": list(self.source_size),
            "scaled_down": self.scaled,
        }


@dataclass(frozen=True)
class Frame:
    """One output frame: number `index` at `time` = index / fps, showing source frame `source_index`."""

    index: int
    time: float
    source_index: int
    rgb: np.ndarray  # uint8 (H, W, 3)


def probe(src: VideoSource, *, max_pixels: int = MAX_PIXELS, limits: DecodeLimits = DECODE) -> VideoInfo:
    """Read `src`'s headers and its first frame. Raises VideoError when it is not a readable video
    or has no frames, BudgetError when its canvas is over `limits.pixels` (before decoding anything)."""
    import av

    name = Path(src).name
    with open_video(src) as c:
        s = c.streams.video[0]
        cc = s.codec_context
        check_canvas(name, int(getattr(cc, "width", 0) or 0), int(getattr(cc, "height", 0) or 0), limits)
        try:
            first = next(c.decode(s), None)
        except (av.FFmpegError, ValueError):
            raise VideoError(f"{name}'s video stream is corrupt: its first frame cannot be decoded.") from None
        if first is None:
            raise VideoError(f"{name} has a video stream with no frames; accepted: {ACCEPTED} holding frames.")
        check_canvas(name, first.width, first.height, limits)
        rot = rotation(s, first)
        w, h = scaled_size(first.width, first.height, max_pixels)
        if rot in (90, 270):
            w, h = h, w
        fps = stream_rate(s)
        duration = float(s.duration * s.time_base) if s.duration and s.time_base else 0.0
        if not duration and c.duration:
            duration = c.duration / 1e6  # microseconds (AV_TIME_BASE)
        frames = int(s.frames) or int(round(duration * fps))
        codec = s.codec_context.name if s.codec_context else "?"
        return VideoInfo(w, h, fps, duration, frames, rot, codec, (first.width, first.height))


def asked_seconds(info: VideoInfo, seconds: float | None) -> float:
    """The seconds of source the part asked for spans (the video, or its first `seconds`), from the headers."""
    length = info.duration if info.duration else info.frames / float(info.fps)
    if seconds is not None:
        length = min(length, seconds) if length else seconds
    return length


def planned_frames(info: VideoInfo, fps: Fraction, seconds: float | None) -> int:
    """Output frames at `fps` over the video (or its first `seconds`), from the headers."""
    return max(1, math.ceil(asked_seconds(info, seconds) * fps - 1e-9))


def check_fps(fps: float | None, info: VideoInfo) -> Fraction:
    """The output rate: `fps` (0.1 to 120) or, when None, the source's. VideoError otherwise."""
    if fps is None:
        return info.fps
    try:
        f = float(fps)
    except (TypeError, ValueError):
        f = float("nan")
    if not 0.1 <= f <= 120:
        raise VideoError(f"Frame rate {fps!r} is out of range; accepted: 0.1 to 120 frames per second, or none.")
    return Fraction(f).limit_denominator(1001)


def frames(
    src: VideoSource,
    *,
    fps: Fraction | float | None = None,
    seconds: float | None = None,
    max_frames: int = SETTINGS.video_max_frames,
    max_pixels: int = MAX_PIXELS,
    limits: DecodeLimits = DECODE,
    info: VideoInfo | None = None,
) -> Iterator[Frame]:
    """Decode `src` to RGB frames at a constant `fps` (default the source's), over its first
    `seconds` (default all). Consecutive output frames may share a source frame (`source_index`)
    when `fps` is above the source's; a source frame no output frame shows is decoded, never converted.
    Stops with VideoError when the stream breaks mid-way or holds more than `max_frames` output frames
    (its headers under-announced it), BudgetError when decoding passes `limits` (pixels decoded, each
    frame's canvas, seconds spent decoding: the consumer's time between frames is not counted).
    info: `probe(src)` when the caller has it already (not probed again, with the same limits)."""
    import av

    info = probe(src, max_pixels=max_pixels, limits=limits) if info is None else info
    rate = fps if isinstance(fps, Fraction) else check_fps(fps, info)
    name = Path(src).name
    k = 0  # next output frame
    decoded = 0
    budget, pixels, spent = limits.gpixels * 1e9, 0, 0.0
    with open_video(src) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        default_step = 1 / float(info.fps)
        prev, t0, t_prev = None, None, 0.0
        rgb: list = []  # prev converted, once it is shown
        end = math.inf if seconds is None else seconds

        def emit_until(t_next: float) -> Iterator[Frame]:
            nonlocal k, spent
            while k / rate < min(t_next, end) - 1e-9:
                if k >= max_frames:
                    raise VideoError(
                        f"{name} holds more than {max_frames:,} frames at {float(rate):g} fps, more than its headers "
                        f"said; accepted: at most {max_frames:,} frames (pass a shorter length or a lower fps)."
                    )
                if not rgb:
                    t = time.perf_counter()
                    rgb.append(_rgb(prev, info))
                    spent += time.perf_counter() - t
                yield Frame(k, float(k / rate), decoded - 1, rgb[0])
                k += 1

        try:
            stream = c.decode(s)
            while True:
                t_start = time.perf_counter()
                f = next(stream, None)
                spent += time.perf_counter() - t_start
                if f is None:
                    break
                check_canvas(name, f.width, f.height, limits)
                pixels += f.width * f.height
                if pixels > budget or spent > limits.seconds:
                    what = f"{pixels / 1e9:,.1f} billion pixels" if pixels > budget else f"{spent:,.0f} s"
                    raise BudgetError(
                        f"Decoding {name} took over this server's bound ({what} after {decoded + 1:,} frames; at most "
                        f"{limits.gpixels:g} billion pixels and {limits.seconds:g} s per video); accepted: a shorter "
                        "length, or a video with fewer or smaller frames."
                    )
                t = f.time if f.time is not None else decoded * default_step
                t0 = t if t0 is None else t0
                t = max(t - t0, t_prev)  # relative to the first frame, never backwards
                if prev is not None:
                    yield from emit_until(t)
                if t >= end:
                    break
                prev, t_prev = f, t
                rgb.clear()
                decoded += 1
                if decoded > 20 * max_frames + 100:
                    raise VideoError(
                        f"{name} has over {20 * max_frames:,} source frames in the part asked for; "
                        "accepted: pass a shorter length."
                    )
        except AttentionError:
            raise  # ours (budget, frame cap): as raised
        except (av.FFmpegError, ValueError) as e:
            raise VideoError(f"{name}'s video stream is corrupt after {decoded} frames ({e}).") from None
        if prev is None:
            raise VideoError(f"{name} has a video stream with no frames; accepted: {ACCEPTED} holding frames.")
        last = t_prev + (default_step if info.duration <= t_prev + 1e-9 else info.duration - t_prev)
        yield from emit_until(last)


def _rgb(f, info: VideoInfo) -> np.ndarray:
    """A decoded frame as uint8 (H, W, 3) RGB at the video's decode size, rotated for display."""
    w, h = (info.height, info.width) if info.rotation in (90, 270) else (info.width, info.height)
    same = (f.width, f.height) == (w, h)
    a = f.to_ndarray(format="rgb24") if same else f.to_ndarray(format="rgb24", width=w, height=h)
    return np.ascontiguousarray(np.rot90(a, info.rotation // 90)) if info.rotation else a


def write_mp4(path: str | os.PathLike, pictures: Iterable[np.ndarray], fps: Fraction | float, *, crf: int = 20) -> int:
    """Encode uint8 (H, W, 3) RGB pictures, all one size, as H.264 in MP4 at `fps`: yuv420p and the
    index at the front (+faststart), so browsers play it as it downloads. Odd sides are padded by one
    black row or column (H.264 4:2:0 needs even sides). Returns the number of frames written."""
    import av

    rate = Fraction(fps).limit_denominator(1001)
    n = 0
    with av.open(os.fspath(path), "w", format="mp4", options={"movflags": "+faststart"}) as out:
        stream = None
        for pic in pictures:
            a = np.asarray(pic, dtype=np.uint8)
            h, w = a.shape[:2]
            if h % 2 or w % 2:
                a = np.pad(a, ((0, h % 2), (0, w % 2), (0, 0)))
            if stream is None:
                stream = out.add_stream("libx264", rate=rate)
                stream.width, stream.height, stream.pix_fmt = a.shape[1], a.shape[0], "yuv420p"
                stream.options = {"crf": str(crf), "preset": "veryfast"}
            elif a.shape[:2] != (stream.height, stream.width):
                raise VideoError(f"Picture {n} is {w}x{h}, not {stream.width}x{stream.height} as the first.")
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(a), format="rgb24")
            frame.pts = n
            frame.time_base = 1 / rate
            out.mux(stream.encode(frame))
            n += 1
        if stream is None:
            raise VideoError("No pictures to encode: the video would have no frames.")
        out.mux(stream.encode(None))
    return n
