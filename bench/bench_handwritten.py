"""Does each piece of hand-written numerics earn its place against the library that does the job?

    python -m bench.bench_handwritten [--repeats 30]

For each decision, the hand-written way and the library way on the app's real sizes (a 720x480
photo at 480 px through a /16 ViT: a 30x45 grid, 6 heads), median of interleaved rounds, and
whether the outputs agree. The decision each ratio backs is kept in a comment at the code:
  - PNG: attention.render.png_bytes (hand-written, used) vs PIL (compress_level=1), time and bytes;
  - upsampling a map to pixels: np.repeat vs PIL's resize(NEAREST) (used by render.upsample);
  - overlays: numpy float32 arithmetic vs PIL resize NEAREST + Image.blend (used by render.overlays);
  - matrix text: the hand parser vs numpy's loadtxt (used by matrices.parse_matrix; the hand parser
    runs only to word an error).
"""

from __future__ import annotations

import argparse
import io
import statistics

import numpy as np
from PIL import Image

from attention import render
from attention.calculator import matrices
from bench.common import PHOTO, median_seconds


def pil_png(img: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def numpy_upsample(a: np.ndarray, p: int) -> np.ndarray:
    return np.repeat(np.repeat(a, p, 0), p, 1)


def numpy_overlays(image: Image.Image, maps: np.ndarray, alpha: float = 0.6, cmap: str = "inferno") -> list:
    img = np.asarray(image)
    p = img.shape[0] // maps.shape[1]
    base = img.astype(np.float32) * (1 - alpha) + 0.5
    out = []
    for m in maps:
        col = numpy_upsample(render.colorize(m, cmap).astype(np.float32) * alpha, p)
        out.append(np.add(base, col, out=np.empty(img.shape, np.uint8), casting="unsafe"))
    return out


def hand_parse(text: str) -> np.ndarray:
    rows = matrices._split_text(text)
    return np.array([[matrices._number(t, "m", i, j) for j, t in enumerate(r)] for i, r in enumerate(rows)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    p, (gh, gw) = 16, (30, 45)
    photo = Image.open(PHOTO).convert("RGB").resize((gw * p, gh * p))
    maps = rng.random((6, gh, gw)).astype(np.float32) ** 4  # peaky, as attention is
    tiles = render.overlays(photo, maps)
    colour = render.colorize(maps[0])
    text = "\n".join(" ".join(f"{x:.4f}" for x in row) for row in rng.normal(size=(64, 64)))

    rows = []
    for name, hand, library in (
        ("PNG, 6 overlays 720x480", lambda: [render.png_bytes(t) for t in tiles], lambda: [pil_png(t) for t in tiles]),
        ("upsample a 30x45 colour map x16", lambda: numpy_upsample(colour, p), lambda: render.upsample(colour, p)),
        ("6 overlays at alpha 0.6", lambda: numpy_overlays(photo, maps), lambda: render.overlays(photo, maps)),
        ("parse a 64x64 matrix text", lambda: hand_parse(text), lambda: matrices.parse_matrix(text)),
    ):
        t_hand, t_lib = [], []
        for _ in range(3):  # interleaved rounds
            t_hand.append(median_seconds(hand, args.repeats))
            t_lib.append(median_seconds(library, args.repeats))
        a, b = hand(), library()
        if name.startswith("PNG"):
            agree = all(np.array_equal(np.asarray(Image.open(io.BytesIO(x))), t) for x, t in zip(a, tiles))
            extra = f"bytes hand/library {sum(map(len, a)) / sum(map(len, b)):.2f}"
        else:
            a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
            diff = float(np.abs(a - b).max())
            agree = diff == 0
            extra = f"max |difference| {diff:g}"
        ratio = statistics.median(t_lib) / statistics.median(t_hand)
        rows.append((name, statistics.median(t_hand) * 1e3, statistics.median(t_lib) * 1e3, ratio, agree, extra))

    print(f"{'what':34s} {'hand ms':>8s} {'library ms':>10s} {'library/hand':>12s}  identical  notes")
    for name, o, t, r, agree, extra in rows:
        print(f"{name:34s} {o:8.2f} {t:10.2f} {r:12.2f}  {str(agree):9s}  {extra}")
    print("library/hand > 1: the hand-written way is faster by that factor (kept only then: the PNG encoder).")


if __name__ == "__main__":
    main()
