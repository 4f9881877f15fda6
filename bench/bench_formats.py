"""Which picture format the ViT tab sends: bytes and encode time per format, one run.

    python bench/bench_formats.py [--repeats 10]

On a photo overlay (chelsea.jpg at 720x480 with a 30x45 map: what the large map shows for a photo)
and on an enlarged digit overlay (28 px x 18 = 504 px, hard patch edges), prints for our PNG
encoder, PIL's WebP (lossless, and quality 90) and JPEG (quality 92, 4:4:4): size, encode ms, and the
largest and mean pixel error. The tab sends JPEG for photos (display only; the download keeps exact PNGs and
float32 arrays) and PNG for enlarged maps, where JPEG would blur the patch edges.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attention import render  # noqa: E402


def pil(fmt: str, **kw):
    def encode(img: np.ndarray) -> bytes:
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format=fmt, **kw)
        return buf.getvalue()

    return encode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    photo = Image.open(ROOT / "examples" / "photos" / "chelsea.jpg").convert("RGB").resize((720, 480))
    digit = Image.open(ROOT / "examples" / "digits" / "digit_3.png").convert("RGB")
    pictures = {
        "photo overlay 720x480": render.overlay(photo, rng.random((30, 45)).astype(np.float32) ** 4),
        "digit overlay x18 504x504": render.upsample(render.overlay(digit, rng.random((7, 7)).astype(np.float32)), 18),
    }
    encoders = {
        "PNG (render.png_bytes)": render.png_bytes,
        "WebP lossless": pil("WEBP", lossless=True, method=0),
        "WebP q90": pil("WEBP", quality=90, method=0),
        "JPEG q92 (render.jpeg_bytes)": render.jpeg_bytes,
    }
    for what, img in pictures.items():
        print(what)
        png = len(render.png_bytes(img))
        for name, enc in encoders.items():
            ts = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                data = enc(img)
                ts.append(time.perf_counter() - t)
            diff = np.abs(np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), int) - img)
            print(
                f"  {name:30s} {len(data) / 1e3:8.1f} kB ({len(data) / png:5.2f} of PNG) "
                f"{statistics.median(ts) * 1e3:7.1f} ms  max error {int(diff.max())}, mean {diff.mean():.2f}"
            )


if __name__ == "__main__":
    main()
