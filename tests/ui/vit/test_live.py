"""Spec of the ViT tab's browser copy (attention.ui.vit.live): the two server functions its script
calls directly answer only for a kept pass named by a token this server signed, and never raise."""

from __future__ import annotations

import base64
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from attention.ui.vit import live as vit_live
from attention.vit.serve import live, passes


@pytest.fixture
def tok(digit_pass):
    passes.PASSES.put(digit_pass.key, digit_pass)
    return live.token(digit_pass.key)


def test_live_maps_answers_a_query_and_layer_of_the_pass(tok, digit_pass):
    got = vit_live.live_maps([tok, [1, 2], 0])
    maps = np.frombuffer(zlib.decompress(base64.b64decode(got["maps"])), np.uint8).reshape(5, 7, 7)
    assert got["query"] == [1, 2] and got["layer"] == 0
    assert np.array_equal(maps, live.indices(digit_pass.at((1, 2), 0).maps))
    assert vit_live.live_maps([tok, None, 3])["query"] is None  # CLS


@pytest.mark.parametrize(
    "args",
    [
        None,
        "x",
        [],
        ["forged.token", [1, 2], 0],
        ["TOKEN", [1, 2], 9],  # off the depth
        ["TOKEN", [7, 0], 0],  # off the grid
        ["TOKEN", [1], 0],
        ["TOKEN", "cls", 0],
        ["TOKEN", [1, 2], 1.5],
        ["TOKEN", ["a", "b"], 0],
        ["TOKEN", [1.0, 2], 0],
        ["TOKEN", [1, 2], True],
        ["TOKEN", [1, 2]],
    ],
)
def test_live_maps_answers_nothing_to_what_it_does_not_accept(tok, args):
    if isinstance(args, list):
        args = [tok if a == "TOKEN" else a for a in args]
    assert vit_live.live_maps(args) is None


def test_live_base_is_the_picture_of_a_kept_pass_only(tok):
    assert vit_live.live_base(tok).startswith("data:image/png;base64,")
    for bad in (None, 3, "", tok + "0", tok.replace("mnist_vit", "dino_vits16")):
        assert vit_live.live_base(bad) is None


def _live_component_id() -> int:
    import app

    (cid,) = [i for i, b in app.demo.blocks.items() if getattr(b, "elem_id", None) == "vit-live"]
    return cid


def _call(app_url: str, fn_name: str, data) -> object:
    """What the page's script does: a direct call of the #vit-live component's server function `fn_name`."""
    import httpx

    body = {"component_id": _live_component_id(), "fn_name": fn_name, "session_hash": "test", "data": data}
    with httpx.Client(timeout=30) as http:
        return http.post(app_url.rstrip("/") + "/gradio_api/component_server/", json=body).json()


@pytest.fixture
def session_seen(app_url):
    """The component route answers a session the server has seen on another route (a page's first event)."""
    import httpx

    cancel = {"session_hash": "test", "fn_index": 0, "event_id": "none"}
    httpx.post(app_url.rstrip("/") + "/gradio_api/cancel", json=cancel).raise_for_status()


def test_the_served_page_holds_the_component_off_screen_and_its_script_gets_the_base_picture(
    app_url, session_seen, tok, digit_pass
):
    import httpx

    config = httpx.get(app_url.rstrip("/") + "/config", timeout=30).json()
    (comp,) = [c for c in config["components"] if c["id"] == _live_component_id()]
    assert comp["props"]["visible"] == "hidden"  # rendered (its script runs), not shown
    got = _call(app_url, "live_base", tok)
    assert got == live.base_image(digit_pass) and got.startswith("data:image/png;base64,")
    assert _call(app_url, "live_base", tok + "0") is None  # a forged token: nothing


def test_concurrent_clients_each_get_their_own_view_over_http(app_url, session_seen, tok, digit_pass):
    """16 clients at once on Gradio's route for component functions (what the page's script calls)."""
    asks = [([r, c], layer) for r in range(7) for c in (0, 3, 6) for layer in range(4)]
    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(lambda ask: _call(app_url, "live_maps", [tok, *ask]), asks))
    for (query, layer), answer in zip(asks, got):
        assert answer["query"] == query and answer["layer"] == layer
        want = live.indices(digit_pass.at(tuple(query), layer).maps)
        assert np.array_equal(np.frombuffer(zlib.decompress(base64.b64decode(answer["maps"])), np.uint8), want.ravel())
