"""Spec of attention.ui.common.server: the guard in front of the launched app (session ids, bodies, rates),
and the clear refusal of a path or URL sent where an image goes, on every image-taking route."""

from __future__ import annotations

import dataclasses
import json
import time

import gradio as gr
import httpx
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import ValidationError

import app
from attention.config import SETTINGS
from attention.ui.common import server
from attention.ui.vit import live as vit_live
from bench.common import answers
from tests.conftest import DIGIT


def _live_id() -> int:
    (cid,) = [i for i, b in app.demo.blocks.items() if getattr(b, "elem_id", None) == "vit-live"]
    return cid


def _open(url: str, session: str, headers: dict | None = None) -> None:
    """A session's first request on a route other than the live one (a page's first event does this)."""
    body = {"session_hash": session, "fn_index": 0, "event_id": "none"}
    httpx.post(url + "gradio_api/cancel", json=body, headers=headers).raise_for_status()


def test_launch_kwargs_give_each_launch_its_own_app_kwargs():
    a, b = app.LAUNCH["app_kwargs"], app.LAUNCH["app_kwargs"]
    assert a is not b and a["middleware"][0].cls.__name__ == "Guard"
    assert {**app.LAUNCH}.keys() >= {"max_file_size", "css", "app_kwargs"}
    off = server.LaunchKwargs(dataclasses.replace(SETTINGS, guard=False), app.demo)
    assert off["app_kwargs"] == {"middleware": []}


def test_session_ids_and_bodies_are_bounded_on_the_launched_app(app_url):
    live = {"data": ["x.y", None, 0], "component_id": _live_id(), "fn_name": "live_maps"}
    r = httpx.post(app_url + "gradio_api/component_server", json={**live, "session_hash": "x" * 1_000_000})
    assert r.status_code == 413  # over the live route's 16 kB
    r = httpx.post(app_url + "gradio_api/queue/join", json={"data": [], "fn_index": 0, "session_hash": "x" * 500_000})
    assert r.status_code == 400 and "session id" in r.json()["detail"]
    big = b"[" + b"0," * (50 << 20) + b"0]"  # 100 MB
    r = httpx.post(app_url + "gradio_api/component_server", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "16,384" in r.json()["detail"]
    r = httpx.post(app_url + "gradio_api/component_server", json={**live, "session_hash": "never-seen"})
    assert r.status_code == 403


def test_a_non_ascii_signature_on_the_live_route_is_answered_null(app_url):
    _open(app_url, "sig-test")
    live = {"component_id": _live_id(), "fn_name": "live_maps", "session_hash": "sig-test"}
    for tok in ('["a","mnist_vit","auto"].' + "é" * 32, '["a"].\ud800'):  # JSON escapes both: \u00e9, \ud800
        body = json.dumps({**live, "data": [tok, None, 0]})
        r = httpx.post(
            app_url + "gradio_api/component_server", content=body, headers={"content-type": "application/json"}
        )
        assert r.status_code == 200 and r.json() is None
    r = httpx.post(app_url + "gradio_api/component_server", json={**live, "fn_name": "live_base", "data": "é.é"})
    assert r.status_code == 200 and r.json() is None


PATHS = ["/etc/hostname", DIGIT, "http://127.0.0.1:9/x.png", "file:///etc/passwd"]


@pytest.mark.parametrize("value", [*PATHS, handle_file("https://example.com/cat.png")])
@pytest.mark.parametrize("api_name", ["/attention_maps", "/feature_maps", "/patch_attention"])
def test_a_path_or_url_as_the_image_is_named_with_what_is_accepted(client, api_name, value):
    with pytest.raises(ValidationError) as e:
        client.predict(value, api_name=api_name)
    msg = str(e.value)
    assert "not a file uploaded to this server" in msg and "handle_file" in msg and "/gradio_api/upload" in msg


@pytest.mark.parametrize("value", PATHS)
def test_a_path_or_url_inside_a_sketch_is_named_too(app_url, value):
    """(Over plain HTTP: gradio_client would upload a local path itself.)"""
    sketch = {"background": None, "layers": [], "composite": {"path": value, "meta": {"_type": "gradio.FileData"}}}
    r = httpx.post(app_url + "gradio_api/call/retrieval_sketch", json={"data": [100, 42, sketch]})
    assert r.status_code == 422 and "not a file uploaded to this server" in r.json()["detail"][0]["message"]


def test_a_path_over_plain_http_gets_the_message_too(app_url):
    r = httpx.post(app_url + "gradio_api/call/attention_maps", json={"data": ["/etc/passwd"]})
    assert r.status_code == 422 and "not a file uploaded" in r.json()["detail"][0]["message"]
    r = httpx.post(app_url + "gradio_api/call/attention_maps", json={"data": [{"path": "../../etc/passwd"}]})
    assert r.status_code == 422


def test_an_uploaded_image_still_goes_through(client):
    _sheet, _npz, info = client.predict(handle_file(DIGIT), model="mnist_vit", api_name="/attention_maps")
    assert info["model"] == "mnist_vit"


def _small_app(**settings):
    """A small Blocks with a server function and an event, launched with LaunchKwargs from tight settings:
    3 new sessions a minute (a fourth held for its turn, 20 s: ATTENTION_ADDRESS_WAITING=1; more refused), 2 live
    calls a second per client (and `settings`)."""
    tight = dataclasses.replace(
        SETTINGS, new_sessions_per_min=3, address_waiting=1, live_per_s=2.0, refusal_delay=0.05, **settings
    )
    with gr.Blocks() as demo:
        box = gr.HTML("", server_functions=[vit_live.live_maps], elem_id="probe")
        gr.Button("go").click(lambda: "ok", None, gr.Textbox(), api_name="go")
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, **server.LaunchKwargs(tight, demo))
    assert answers(url + "gradio_api/info", 60, 0.2), f"the small app did not answer at {url} in 60 s"
    return demo, url, box._id


@pytest.fixture
def small_app():
    """`_small_app` behind a proxy on loopback the operator trusts (ATTENTION_TRUSTED_PROXIES=127.0.0.1)."""
    demo, url, cid = _small_app(trusted_proxies="127.0.0.1")
    yield url, cid
    demo.close()


@pytest.fixture
def small_app_no_proxy():
    """`_small_app` with no proxy trusted (the default: a visitor's X-Forwarded-For means nothing)."""
    demo, url, cid = _small_app(trusted_proxies="", proxy_hops=0)
    yield url, cid
    demo.close()


def _status(url: str, **kw) -> int | str:
    """The status of a POST to `url`, or "held" when the guard holds it past 6 s (a new session waiting for its
    turn, not the up to 4 s of pacing a burst)."""
    try:
        return httpx.post(url, timeout=6, **kw).status_code
    except httpx.ReadTimeout:
        return "held"


def test_a_forged_forwarding_header_opens_no_new_client(small_app_no_proxy):
    """40 new-session calls, each naming an address of its own in X-Forwarded-For: all one client (the
    peer), so past the 3 a minute the next is held for its turn and the others refused."""
    url, _ = small_app_no_proxy
    codes = [
        _status(url + "gradio_api/call/go", json={"data": []}, headers={"X-Forwarded-For": f"10.9.{i}.1"})
        for i in range(40)
    ]
    # (a later one may be held too: a token comes back every 20 s while they are sent); a forged address each
    # would have been 40 clients, all answered 200
    assert codes[:4] == [200] * 3 + ["held"] and set(codes[4:]) <= {429, "held"} and codes.count(429) >= 30, codes
    # a forged entry to the left of what a trusted proxy appends is not believed either
    from attention.crowd.clients import Proxies

    assert Proxies.parse("127.0.0.1").client("127.0.0.1", "6.6.6.6, 1.2.3.4") == "1.2.3.4"
    assert Proxies.parse("", hops=1).client("10.0.0.9", "6.6.6.6, 1.2.3.4") == "1.2.3.4"
    assert Proxies.parse("").client("127.0.0.1", "6.6.6.6") == "127.0.0.1"
    assert Proxies.parse("127.0.0.1").client("127.0.0.1", "not-an-ip") == "127.0.0.1"


def test_the_rates_of_new_sessions_and_live_calls_are_bounded_per_client(small_app):
    url, cid = small_app
    joins = [_status(url + "gradio_api/call/go", json={"data": []}) for _ in range(4)]
    assert joins == [200, 200, 200, "held"]  # each call without a session opens one; past 3, held for its turn
    refused = httpx.post(url + "gradio_api/call/go", json={"data": []})  # past the address's room of 1 waiting
    assert refused.status_code == 429 and "new sessions from your address" in refused.json()["detail"]
    assert int(refused.headers["retry-after"]) >= 20
    # another client (as the trusted proxy on loopback names it in X-Forwarded-For) is not held back
    other = {"X-Forwarded-For": "10.1.2.3"}
    assert Client(url, verbose=False, headers=other).predict(api_name="/go") == "ok"
    third = {"X-Forwarded-For": "10.1.2.4"}
    body = {"data": ["x.y", None, 0], "component_id": cid, "fn_name": "live_maps", "session_hash": "s1"}
    assert httpx.post(url + "gradio_api/component_server", json=body, headers=third).status_code == 403
    _open(url, "s1", third)
    t0 = time.monotonic()
    live = [httpx.post(url + "gradio_api/component_server", json=body, headers=third).status_code for _ in range(20)]
    elapsed = time.monotonic() - t0
    # a burst of twice 2 a second, then 2 a second: however slow the calls (a loaded machine), no more pass
    assert live[:4] == [200] * 4 and set(live) <= {200, 429}
    assert live.count(200) <= 4 + 2 * elapsed + 1, (live, elapsed)
    assert 429 in live or elapsed > 7, (live, elapsed)  # 20 calls within 7 s: over the 4 + 2 x 7 allowed


def test_the_served_process_janitor_sweeps_the_empty_folders_gradio_leaves(tmp_path, monkeypatch):
    """`memory_upkeep`'s janitor removes, on its first round, the upload folder's empty folders that have
    been empty a minute (Gradio's cache deletion leaves one per file served), and keeps the others; and the
    MCP `data:` files older than MCP_COPY_AGE (tests/ui/common/test_mcp.py: 60 of them)."""
    import os

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    old, new, full = tmp_path / "old", tmp_path / "new", tmp_path / "full"
    mcp_old, mcp_new = tmp_path / server.MCP_COPIES / "a", tmp_path / server.MCP_COPIES / "b"
    for d in (old, new, full, mcp_old, mcp_new):
        d.mkdir(parents=True)
    for d in (full, mcp_old, mcp_new):
        (d / "x.png").write_bytes(b"x")
    for d in (old, mcp_old):
        os.utime(d, (time.time() - 120, time.time() - 120))
    janitor = server.memory_upkeep(dataclasses.replace(SETTINGS, malloc_arenas=0, memory_every=0.05))
    try:
        deadline = time.monotonic() + 10
        while (old.exists() or mcp_old.exists()) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        janitor.stop()
    assert not old.exists() and new.exists() and full.exists()
    assert not mcp_old.exists() and (mcp_new / "x.png").exists()
