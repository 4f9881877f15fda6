"""Command line: `python -m attention maps IMAGE... [options]`.

Writes, per image, each head's map, the mean and the threshold masks as PNG overlays and
the raw arrays as .npz (as DINO's visualize_attention.py does), into OUT/<image name>/.
A bad file gets one clear line; the other images are still processed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attention.errors import AttentionError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attention", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("maps", help="write attention maps of images (PNG overlays + .npz)")
    m.add_argument("images", nargs="+", type=Path, help="image files")
    m.add_argument(
        "--model", default="dino_vits16", help="alias (dino_vits16, mnist_vit, ...), timm name or hf-hub:org/repo"
    )
    m.add_argument("--layer", type=int, default=-1, help="layer (default: last)")
    m.add_argument("--resolution", default="auto", help="shorter side in px, 'auto' or 'native' (default: auto)")
    m.add_argument("--query", default="cls", help="'cls' or ROW,COL of a patch (default: cls)")
    m.add_argument("--threshold", type=float, default=0.6, help="share of each head's mass kept by masks (default 0.6)")
    m.add_argument("--cmap", default="inferno", help="matplotlib colormap (default inferno)")
    m.add_argument("--out", type=Path, default=Path("attention_out"), help="output folder (default attention_out)")
    return p


def _query(text: str):
    if text.strip().lower() == "cls":
        return "cls"
    try:
        r, c = (int(v) for v in text.split(","))
    except ValueError:
        raise AttentionError(f"--query {text!r} is not accepted; use 'cls' or ROW,COL such as 3,5.") from None
    return (r, c)


def write_outputs(res, out: Path, *, threshold: float, cmap: str) -> None:
    """img.png, head_XX.png, mean.png, mask_XX.png (the app's tiles) and attention.npz (`res.arrays`)."""
    import numpy as np

    from attention.render import png_bytes
    from attention.vit.views import tiles

    out.mkdir(parents=True, exist_ok=True)
    (out / "img.png").write_bytes(png_bytes(np.asarray(res.image)))
    for t in tiles(res, "heads", cmap=cmap) + tiles(res, "masks", threshold=threshold):
        (out / f"{t.name}.png").write_bytes(png_bytes(t.image))
    np.savez_compressed(out / "attention.npz", **res.arrays(threshold))


def maps(args) -> int:
    from tqdm.auto import tqdm

    from attention.vit.extract import attention_maps
    from attention.vit.models import load_vit

    try:
        model = load_vit(args.model)
        query = _query(args.query)
    except AttentionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    failed = 0
    stems: dict[str, int] = {}
    for path in tqdm(args.images, desc="images", unit="img", disable=len(args.images) < 2):
        try:
            res = attention_maps(model, path, layer=args.layer, query=query, resolution=args.resolution)
            n = stems[path.stem] = stems.get(path.stem, 0) + 1
            out = args.out / (path.stem if n == 1 else f"{path.stem}_{n}")
            write_outputs(res, out, threshold=args.threshold, cmap=args.cmap)
            tqdm.write(f"{path}: {res.maps.shape[0]} heads, grid {res.grid[0]}x{res.grid[1]} -> {out}/")
        except AttentionError as e:
            failed += 1
            tqdm.write(f"{path}: skipped: {e}", file=sys.stderr)
    print(f"{len(args.images) - failed} of {len(args.images)} images written to {args.out}/")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return {"maps": maps}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
