"""Make the example clips of examples/videos/ (the app's video examples), from files shipped here.

    python examples/make_videos.py

digits.mp4: three MNIST digits of examples/digits/ crossing a black 112x56 frame (for mnist_vit,
which the app uses offline; run it at resolution 'native'). chelsea.mp4: a slow pan and zoom over
examples/photos/chelsea.jpg (for DINO). Both H.264 at 10 fps, 4 s, written by `attention.videos`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from attention.videos import write_mp4  # noqa: E402

FPS, SECONDS = 10, 4


def digits() -> list[np.ndarray]:
    """Digits 3, 7 and 1 crossing a black 112x56 frame at different speeds and heights."""
    ds = {k: np.asarray(Image.open(HERE / "digits" / f"digit_{k}.png").convert("L")) for k in (3, 7, 1)}
    n = FPS * SECONDS
    out = []
    for i in range(n):
        a = np.zeros((56, 112), np.uint8)
        t = i / (n - 1)
        for k, x, y in ((3, 4 + t * 76, 2), (7, 80 - t * 76, 26), (1, 40 + 30 * np.sin(2 * np.pi * t), 14)):
            x, y = int(round(x)), int(y)
            a[y : y + 28, x : x + 28] = np.maximum(a[y : y + 28, x : x + 28], ds[k])
        out.append(np.repeat(a[..., None], 3, 2))
    return out


def chelsea() -> list[np.ndarray]:
    """A 480x360 window panning and zooming over the photo (bicubic crops)."""
    img = Image.open(HERE / "photos" / "chelsea.jpg").convert("RGB")
    W, H = img.size
    n = FPS * SECONDS
    out = []
    for i in range(n):
        t = i / (n - 1)
        w = min(W, H * 4 / 3) * (1.0 - 0.2 * t)  # from the whole photo, zooming in
        h = w * 3 / 4
        x0, y0 = (W - w) * (0.1 + 0.8 * t), (H - h) * 0.4
        out.append(np.asarray(img.resize((480, 360), Image.BICUBIC, box=(x0, y0, x0 + w, y0 + h))))
    return out


if __name__ == "__main__":
    (HERE / "videos").mkdir(exist_ok=True)
    for name, frames in (("digits", digits()), ("chelsea", chelsea())):
        path = HERE / "videos" / f"{name}.mp4"
        write_mp4(path, frames, FPS, crf=20)
        print(f"{path}: {len(frames)} frames, {path.stat().st_size / 1024:.0f} kB")
