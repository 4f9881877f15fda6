"""What a browser needs to redraw the large map by itself: patch, layer and head changes at once.

None of those three needs a forward pass, yet any answer through Gradio's queue costs 90-120 ms
on 2 cores before our work starts (bench/bench_browser.py). So every answer of the ViT tab also
carries `payload`: how the large map is drawn and the layer's maps of every head, as the very
colormap indices `render.colorize` picks, and `attention/vit/serve/live.js` draws the large map
itself: a head change from the payload, a patch click or a layer change from `view_maps`, asked
of the server directly (a few ms of work, no queue, about 10 kB). The tab's answer follows with
everything else (head tiles, scores) and the server's own picture, the same one.

A browser names a pass by `token`: its key signed with this server's secret, so it can fetch
only passes it was given (never a pass of someone else's image by guessing a digest).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import zlib

import numpy as np

from attention.render import color_indices, colormap, png_bytes
from attention.vit.draw import drawing
from attention.vit.engine.extract import AttentionMaps
from attention.vit.engine.query import Query
from attention.vit.serve.passes import PASSES, Pass

_SECRET = secrets.token_bytes(32)  # per server process: tokens die with it, as the passes do


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _sign(body: str) -> str:
    return hmac.new(_SECRET, _utf8(body), hashlib.sha256).hexdigest()[:32]


def _utf8(text: str) -> bytes:
    """Any str as bytes (a lone surrogate from JSON too), for signing and comparing."""
    return text.encode("utf-8", "surrogatepass")


def _query(res: AttentionMaps) -> list[int] | None:
    """The query as the browser has it: [row, col], or null for a named token (CLS, a register, the pool's)."""
    return None if isinstance(res.query, str) else list(res.query)


def layout(res: AttentionMaps) -> drawing.Layout:
    """How `res`'s pictures are laid out (`drawing.layout`): what the server draws and the browser copies."""
    return drawing.layout(res.image.size, res.patch_size, res.grid, res.maps.shape[0])


def token(key: tuple[str, ...]) -> str:
    """A pass's key, signed: '<key as JSON>.<hmac>' (the browser hands it back to fetch data)."""
    body = json.dumps(list(key), separators=(",", ":"))
    return f"{body}.{_sign(body)}"


def find(tok: str) -> Pass | None:
    """The kept pass a `token` names; None for a forged or malformed token or a pass no longer kept."""
    if not isinstance(tok, str) or "." not in tok:
        return None
    body, sig = tok.rsplit(".", 1)
    if not hmac.compare_digest(_utf8(sig), _sign(body).encode()):  # bytes: any text, never a TypeError
        return None
    return PASSES.get(tuple(json.loads(body)))


def indices(maps: np.ndarray) -> np.ndarray:
    """uint8 (H + 1, gh, gw): the colormap index of every patch in each of `maps` (H, gh, gw) and in
    their mean, each min-max scaled on its own: exactly what `render.colorize` picks."""
    maps = np.asarray(maps, dtype=np.float32)
    return np.stack([color_indices(m) for m in [*maps, maps.mean(0)]])


def packed(maps: np.ndarray) -> str:
    """`indices(maps)`, zlib-compressed, base64: what the browser draws from."""
    return _b64(zlib.compress(indices(maps).tobytes(), 6))


def payload(p: Pass, res: AttentionMaps, *, view: str, head: int, alpha: float, cmap: str) -> dict:
    """The browser's copy of the view on screen (JSON-able): how to draw it (`drawing.Layout.to_json`:
    grid, patch size, enlargements, the gallery's reduction, the tiles' maps, the query's marks; then the
    colormap, opacity, query) and the heads' and mean's maps of the layer (`packed`)."""
    L, H, N = res.weights.shape
    return {
        "token": token(p.key),
        **layout(res).to_json(_query(res)),
        "layers": L,
        "heads": H,
        "layer": res.layer,
        "head": int(head),
        "view": view,
        "query": _query(res),
        "alpha": float(alpha),
        "lut": _b64(colormap(cmap).tobytes()),
        "maps": packed(res.maps),
    }


def view_maps(p: Pass, query: Query | None, layer: int) -> dict:
    """The maps of `query` at `layer` from pass `p` (no forward: its kept q/k), as `payload` packs
    them. Raises InputError off the grid or depth."""
    res = p.at(query, layer)
    return {
        "layer": res.layer,
        "query": _query(res),
        "marks": layout(res).marks_json(_query(res)),
        "maps": packed(res.maps),
    }


def base_image(p: Pass) -> str:
    """The picture the maps lie on (the preprocessed image, before enlargement) as a PNG data URL:
    lossless, photos too, so the browser's drawings are the server's pictures pixel for pixel (a JPEG
    base put them up to several levels off; the PNG is about 4x the bytes, fetched once per pass)."""
    return "data:image/png;base64," + _b64(png_bytes(np.asarray(p.base.image.convert("RGB"), dtype=np.uint8)))
