"""Which picture format the ViT tab sends: bytes and encode time per format, one run.

    python -m bench.bench_formats [--repeats 10]

On a photo overlay (chelsea.jpg at 720x480 with a 30x45 map: what the large map shows for a photo)
and on an enlarged digit overlay (28 px x 18 = 504 px, hard patch edges), prints for our PNG
encoder, PIL's WebP (lossless, and quality 90) and JPEG (quality 92, 4:4:4): size, encode ms, and the
largest and mean pixel error. The tab sends JPEG for photos (display only; the download keeps exact PNGs and
float32 arrays) and PNG for enlarged maps, where JPEG would blur the patch edges. Ends with the
table as docs/vit.md quotes it (Markdown, between its markers).
"""

from __future__ import annotations

import argparse
import io
from typing import NamedTuple

import numpy as np
from PIL import Image

from attention import render
from bench.common import DIGITS, PHOTO, markdown_table, median_seconds, readme_block


def pil(fmt: str, **kw):
    def encode(img: np.ndarray) -> bytes:
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format=fmt, **kw)
        return buf.getvalue()

    return encode


class Row(NamedTuple):
    """One picture through one encoder."""

    picture: str
    encoder: str
    nbytes: int
    of_png: float  # bytes / the PNG's bytes
    seconds: float  # median encode time
    max_error: int  # largest |decoded - original| over pixels and channels, grey levels
    mean_error: float


def formats_table(rows: list[Row]) -> str:
    """docs/vit.md's table of this bench's rows (Markdown)."""
    header = ["picture", "encoder", "kB", "of PNG", "encode ms", "max error", "mean error"]
    return markdown_table(
        header,
        [
            (
                r.picture,
                r.encoder,
                f"{r.nbytes / 1e3:.1f}",
                f"{r.of_png:.2f}",
                f"{r.seconds * 1e3:.1f}",
                r.max_error,
                f"{r.mean_error:.2f}",
            )
            for r in rows
        ],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    photo = Image.open(PHOTO).convert("RGB").resize((720, 480))
    digit = Image.open(DIGITS[3]).convert("RGB")
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
    rows = []
    for what, img in pictures.items():
        print(what)
        png = len(render.png_bytes(img))
        for name, enc in encoders.items():
            seconds = median_seconds(lambda enc=enc, img=img: enc(img), args.repeats)
            data = enc(img)
            diff = np.abs(np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), int) - img)
            rows.append(Row(what, name, len(data), len(data) / png, seconds, int(diff.max()), float(diff.mean())))
            print(
                f"  {name:30s} {len(data) / 1e3:8.1f} kB ({len(data) / png:5.2f} of PNG) "
                f"{seconds * 1e3:7.1f} ms  max error {int(diff.max())}, mean {diff.mean():.2f}"
            )
    print(readme_block("bench_formats", "formats", formats_table(rows)))


if __name__ == "__main__":
    main()
