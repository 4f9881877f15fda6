"""Spec of attention.vit.serve.live: what a browser gets to draw the large map itself, and how it names
a pass. Runs offline on the shipped mnist_vit (a 7x7 grid, 4 layers, 4 heads)."""

from __future__ import annotations

import base64
import io
import json
import threading
import zlib

import numpy as np
import pytest
from PIL import Image

from attention.errors import InputError
from attention.render import colorize, colormap
from attention.vit.draw.views import query_image
from attention.vit.serve import live, passes
from tests.conftest import DIGIT


@pytest.fixture
def kept(digit_pass):
    """digit_pass, kept in the server's store of passes (where tokens find passes)."""
    passes.PASSES.put(digit_pass.key, digit_pass)
    return digit_pass


def unpack(b64: str, heads: int, grid: tuple[int, int]) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(b64)), np.uint8).reshape(heads + 1, *grid)


def draw(res, idx: np.ndarray, which: int, cmap: str = "inferno", alpha: float = 0.6) -> np.ndarray:
    """What live.js draws from the indices (the overlay part, before enlargement), in numpy."""
    img = np.asarray(res.image, dtype=np.uint8)
    p = res.patch_size
    colour = np.repeat(np.repeat(colormap(cmap)[idx[which]], p, 0), p, 1)
    return np.array(Image.blend(Image.fromarray(img), Image.fromarray(colour), alpha))


def test_indices_are_the_colormap_rows_the_server_picks_for_every_head_and_the_mean(digit_pass):
    res = digit_pass.at((2, 5), 1)
    idx = live.indices(res.maps)
    assert idx.shape == (5, 7, 7) and idx.dtype == np.uint8
    lut = colormap("inferno")
    for h in range(4):
        assert np.array_equal(lut[idx[h]], colorize(res.maps[h]))
    assert np.array_equal(lut[idx[4]], colorize(res.mean))


def test_drawing_from_the_payload_gives_the_servers_large_map_exactly(digit_pass):
    res = digit_pass.at((3, 1), 2)
    pl = live.payload(digit_pass, res, view="heads", head=1, alpha=0.6, cmap="viridis")
    idx = unpack(pl["maps"], pl["heads"], tuple(pl["grid"]))
    assert np.array_equal(colormap("viridis"), np.frombuffer(base64.b64decode(pl["lut"]), np.uint8).reshape(256, 3))
    for which, head in ((1, 1), (4, None)):  # a head, and the mean
        ours = draw(res, idx, which, "viridis")
        s = pl["scale"]
        server = query_image(res, head=head, alpha=0.6, cmap="viridis")
        plain = np.repeat(np.repeat(ours, s, 0), s, 1)
        # the same pixels everywhere but the crosshair the server draws over the query
        step = res.patch_size * s
        far = np.ones(server.shape[:2], bool)
        r, c = res.query
        far[max(0, (r - 3) * step) : (r + 4) * step, :] = False
        far[:, max(0, (c - 3) * step) : (c + 4) * step] = False
        assert np.array_equal(plain[far], server[far])


def test_the_payload_says_how_to_draw_and_is_json(kept):
    digit_pass = kept
    res = digit_pass.at("cls", -1)
    pl = json.loads(json.dumps(live.payload(digit_pass, res, view="mean", head=2, alpha=0.3, cmap="inferno")))
    assert pl["grid"] == [7, 7] and pl["patch"] == 4 and pl["layers"] == 4 and pl["heads"] == 4
    assert pl["layer"] == 3 and pl["head"] == 2 and pl["view"] == "mean" and pl["query"] is None
    assert pl["scale"] == 18 and pl["alpha"] == 0.3  # 28 px shown at 504 px, as views.big_scale
    assert pl["tile_scale"] == 8 and pl["tile_reduce"] == 1 and pl["tile_rows"]["mean"] == [4]  # drawing.Layout
    assert pl["marks"] == {"big": [], "tile": []}  # CLS: no patch to mark
    assert live.find(pl["token"]) is digit_pass


def test_view_maps_are_any_query_and_layer_of_the_kept_pass_without_a_forward(digit_pass, monkeypatch):
    monkeypatch.setattr(passes, "forward", lambda *a: pytest.fail("no forward pass"))
    got = live.view_maps(digit_pass, (6, 0), 0)
    assert got["query"] == [6, 0] and got["layer"] == 0
    assert got["marks"] == live.layout(digit_pass.base).marks_json((6, 0))  # the new query's crosshair and square
    assert len(got["marks"]["big"]) == 4 + 4  # top, right arms (edge, colour), the square; the rest is off it
    want = live.indices(digit_pass.at((6, 0), 0).maps)
    assert np.array_equal(unpack(got["maps"], 4, (7, 7)), want)
    assert live.view_maps(digit_pass, "cls", -1)["layer"] == 3
    with pytest.raises(InputError, match="rows 0-6"):
        live.view_maps(digit_pass, (7, 0), 0)


def test_a_token_names_only_a_kept_pass_and_cannot_be_forged(kept):
    digit_pass = kept
    tok = live.token(digit_pass.key)
    assert live.find(tok) is digit_pass
    body, sig = tok.rsplit(".", 1)
    other = json.dumps([digit_pass.key[0], "dino_vits16", "auto"], separators=(",", ":"))
    for bad in (f"{other}.{sig}", f"{body}.{'0' * 32}", body, "", None, 42, "x.y"):
        assert live.find(bad) is None
    for bad in (f"{body}.{'é' * 32}", f"{body}.\ud800", f"\ud800.{sig}", f"{body}.{sig[:-1]}\u00ff"):
        assert live.find(bad) is None  # any text, not only ASCII: refused, never a TypeError
    assert live.find(live.token(("0" * 40, "mnist_vit", "auto"))) is None  # signed, but no such pass kept


def test_the_base_picture_is_the_image_the_maps_lie_on(digit_pass):
    url = live.base_image(digit_pass)
    assert url.startswith("data:image/png;base64,")  # small images: lossless
    img = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert np.array_equal(np.asarray(img.convert("RGB")), np.asarray(digit_pass.base.image.convert("RGB")))
    photo = passes.get_pass(DIGIT, "mnist_vit", "224")  # 224 px: shown 1:1, as a photo is (its pictures JPEG)
    url = live.base_image(photo)
    assert url.startswith("data:image/png;base64,")  # the base stays lossless: drawings equal the server's
    img = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert np.array_equal(np.asarray(img), np.asarray(photo.base.image.convert("RGB")))


def test_many_threads_asking_for_views_of_one_pass_each_get_their_own(digit_pass):
    asks = [((r, c), layer) for r in range(7) for c in range(0, 7, 3) for layer in range(4)]
    want = {a: live.view_maps(digit_pass, *a)["maps"] for a in asks}
    got, errors = {}, []

    def worker(chunk):
        try:
            for a in chunk:
                got[a] = live.view_maps(digit_pass, *a)["maps"]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(asks[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and got == want
