"""Opening a video file as FFmpeg is allowed to, and what its stream says before decoding.

Only container formats that hold their own frames are opened (`FORMATS`): playlists (.m3u8), concat
lists and other files that name other files are refused, and FFmpeg reads only the file given (its
protocol whitelist). A decoded frame's canvas is checked against `DecodeLimits` before it is decoded
(`check_canvas`). `videos` decodes and encodes on top of this.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from attention.config import SETTINGS
from attention.errors import BudgetError, VideoError

VideoSource = str | os.PathLike
ACCEPTED = "MP4, WebM, MOV, MKV, AVI or GIF files with a video stream"
FORMATS = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,gif"  # FFmpeg demuxers that are opened (none that names files)
OPEN_OPTIONS = {"format_whitelist": FORMATS, "protocol_whitelist": "file"}
PLAYLIST_HEADS = (b"#EXTM3U", b"ffconcat", b"[playlist]", b"<?xml", b"<smil", b"#EXT")


@dataclass(frozen=True)
class DecodeLimits:
    """What decoding one video may cost: pixels of one decoded frame (the canvas), pixels decoded in all
    (billions), seconds of decoding."""

    pixels: int = SETTINGS.video_decode_pixels  # ATTENTION_VIDEO_DECODE_PIXELS
    gpixels: float = SETTINGS.video_decode_gpixels  # ATTENTION_VIDEO_DECODE_GPIXELS
    seconds: float = SETTINGS.video_decode_seconds  # ATTENTION_VIDEO_DECODE_SECONDS


DECODE = DecodeLimits()


def open_video(src: VideoSource):
    """`src` opened by PyAV, only as a container that holds its own frames (`FORMATS`, the file alone);
    VideoError naming what is accepted when it is a playlist, unreadable or has no video stream."""
    import av

    path = Path(src)
    if not path.is_file():
        raise VideoError(f"No such video file: {path.name}")
    with open(path, "rb") as f:
        head = f.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(PLAYLIST_HEADS):
        raise VideoError(
            f"{path.name} is a playlist or a list of other files, not a video; accepted: {ACCEPTED} (the frames "
            "themselves, in the file sent)."
        )
    try:
        container = av.open(os.fspath(path), metadata_errors="ignore", options=OPEN_OPTIONS)
    except (av.FFmpegError, UnicodeDecodeError, ValueError):
        raise VideoError(f"{path.name} is not a video FFmpeg can read; accepted: {ACCEPTED}.") from None
    if not container.streams.video:
        container.close()
        raise VideoError(
            f"{path.name} holds no video frames (no video stream: audio only, data or empty); accepted: {ACCEPTED}."
        )
    return container


def rotation(stream, first) -> int:
    """Degrees counter-clockwise the display matrix asks for, as a multiple of 90 (0..270)."""
    r = getattr(first, "rotation", 0) if first is not None else 0
    return int(round((r or 0) / 90.0)) % 4 * 90


def scaled_size(w: int, h: int, max_pixels: int) -> tuple[int, int]:
    """(w, h) scaled down (aspect kept, even sides) to at most `max_pixels`; unchanged when it fits."""
    if w * h <= max_pixels:
        return w, h
    s = math.sqrt(max_pixels / (w * h))
    return max(2, int(w * s) // 2 * 2), max(2, int(h * s) // 2 * 2)


def stream_rate(stream) -> Fraction:
    """The stream's frame rate: average, else guessed, else base (0 to 1000 fps), else 25."""
    for r in (stream.average_rate, stream.guessed_rate, stream.base_rate):
        if r and 0 < float(r) <= 1000:
            return Fraction(r).limit_denominator(1001)
    return Fraction(25)


def check_canvas(name: str, width: int, height: int, limits: DecodeLimits = DECODE) -> None:
    """BudgetError when a decoded frame of `width` x `height` (the container's canvas) is over `limits.pixels`."""
    if width * height > limits.pixels:
        raise BudgetError(
            f"{name}'s frames decode to {width:,}x{height:,} px (its canvas), over this server's {limits.pixels:,} "
            f"pixels per decoded frame; accepted: a video whose frames are at most {limits.pixels:,} pixels "
            "(a GIF's canvas counts whole, whatever each frame covers)."
        )
