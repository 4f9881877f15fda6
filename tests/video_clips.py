"""Videos made in the tests, encoded with PyAV directly (not through `attention.videos`), so the
package's decoder is checked against files it did not write.

    centres = moving_digit("clip.mp4", n=20, fps=10)   # a digit crossing a black 112x56 frame
    encode("x.mp4", frames, fps=10, pts_ms=[0, 100, 150])  # any frames, any timing, any rotation
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
DIGIT_3 = ROOT / "examples" / "digits" / "digit_3.png"


def encode(
    path,
    frames: list[np.ndarray],
    *,
    fps: float = 10,
    pts_ms: list[int] | None = None,
    rotation: int | None = None,
    codec: str = "libx264",
    fmt: str | None = None,
) -> str:
    """Encode uint8 (H, W, 3) frames: at `fps`, or at the given presentation times in ms (a
    variable frame rate); `rotation`: the display matrix's counter-clockwise degrees."""
    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream(codec, rate=Fraction(fps).limit_denominator(1001))
        s.height, s.width = frames[0].shape[:2]
        s.pix_fmt = "yuv420p"
        s.options = {"preset": "ultrafast", "crf": "10"}
        if pts_ms is not None:
            s.codec_context.time_base = s.time_base = Fraction(1, 1000)
        if rotation is not None:
            s.set_display_rotation(rotation)
        for i, a in enumerate(frames):
            f = av.VideoFrame.from_ndarray(np.ascontiguousarray(a), format="rgb24")
            if pts_ms is not None:
                f.pts, f.time_base = pts_ms[i], Fraction(1, 1000)
            else:
                f.pts, f.time_base = i, 1 / s.codec_context.framerate
            c.mux(s.encode(f))
        c.mux(s.encode(None))
    return str(path)


def moving_digit(path, *, n: int = 20, fps: float = 10, size: tuple[int, int] = (112, 56)) -> np.ndarray:
    """A 28x28 MNIST 3 moving left to right across a black frame of `size` (W, H), n frames.
    Returns the digit's centre (y, x) in px per frame, int (n, 2)."""
    d = np.asarray(Image.open(DIGIT_3).convert("L"))
    W, H = size
    frames, centres = [], []
    for i in range(n):
        a = np.zeros((H, W, 3), np.uint8)
        x, y = 2 + i * (W - 32) // max(1, n - 1), (H - 28) // 2
        a[y : y + 28, x : x + 28] = d[..., None]
        frames.append(a)
        centres.append((y + 14, x + 14))
    encode(path, frames, fps=fps)
    return np.array(centres)


def levels(n: int, size: tuple[int, int] = (32, 16)) -> list[np.ndarray]:
    """n flat grey frames of `size` (W, H), frame i at grey level 20 + 20 i: which source frame an
    output frame shows is read from its level."""
    W, H = size
    return [np.full((H, W, 3), 20 + 20 * i, np.uint8) for i in range(n)]


def level_index(rgb: np.ndarray) -> int:
    """The frame number `levels` gave this (decoded) frame."""
    return int(round((float(rgb.mean()) - 20) / 20))


def four_hours(path) -> str:
    """A 4-hour video at 1 fps (14,400 black 16x16 frames; about 190 kB, 2-3 s to make)."""
    a = np.zeros((16, 16, 3), np.uint8)
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=1)
        s.width = s.height = 16
        s.pix_fmt = "yuv420p"
        s.options = {"preset": "ultrafast"}
        f = av.VideoFrame.from_ndarray(a, format="rgb24")
        for i in range(14400):
            f.pts = i
            c.mux(s.encode(f))
        c.mux(s.encode(None))
    return str(path)
