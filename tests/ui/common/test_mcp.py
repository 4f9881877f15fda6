"""MCP: the app serves its API endpoints as tools, each parameter described for the assistant; the `data:`
files of MCP calls are swept; tool calls of light endpoints are held whole in the MCP lane (at most
ATTENTION_MCP_SLOTS at once for every caller together, round-robin between addresses; agents behind one address
wait their turns, refused only past the address's room, as a tool error held a moment), heavy ones are not."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import io
import json
import os
import re
import threading
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import gradio as gr
import httpx
import numpy as np
import pytest
from gradio.utils import get_upload_folder
from PIL import Image

from attention.config import SETTINGS
from attention.crowd.admission import MCP
from attention.ui.common import admit, server
from attention.ui.common.admit import HEAVY_QUEUE
from bench.common import answers


def schema(app_url: str) -> dict[str, dict]:
    with urllib.request.urlopen(app_url.rstrip("/") + "/gradio_api/mcp/schema", timeout=30) as r:
        return {t["name"]: t for t in json.load(r)}


def test_the_attention_map_tool_describes_every_parameter(app_url):
    tools = schema(app_url)
    assert "attention_maps" in tools and "feature_maps" in tools
    tool = tools["attention_maps"]
    assert "self-attention" in tool["description"]
    props = tool["inputSchema"]["properties"]
    assert set(props) == {"image", "model", "layer", "resolution", "view", "threshold", "query_row", "query_col"} | {
        "head_fusion",
        "discard_ratio",
        "discard",
    }
    for name, prop in props.items():
        if name != "image":  # gradio describes file inputs itself
            assert len(prop["description"]) > 20, name
    assert "CLS" in props["query_row"]["description"] and "dino480" in props["resolution"]["description"]


def test_shared_parameters_are_described_alike_and_no_placeholder_is_left(app_url):
    """A parameter several tools share (`api_docs.ARGS`) reads the same in each; no "{name}" is left."""
    from attention.ui.common.api_docs import ARGS

    tools = schema(app_url)
    texts = [t["description"] for t in tools.values()]
    texts += [p.get("description", "") for t in tools.values() for p in t["inputSchema"]["properties"].values()]
    left = [t for t in texts if any("{" + name + "}" in t for name in (*ARGS, "models", "text_models"))]
    assert not left
    assert {"attention_maps", "explain_row"} <= set(tools), sorted(tools)
    shared = [n for n in tools if n.startswith(("attention_maps", "explain_row", "export_view"))]
    assert len(shared) == 3, sorted(tools)
    for name in shared:
        props = tools[name]["inputSchema"]["properties"]
        for arg in ("layer", "query_row", "query_col", "resolution"):
            assert props[arg]["description"].startswith(ARGS[arg]), (name, arg)


def test_private_ui_events_are_not_tools(app_url):
    tools = schema(app_url)
    assert not any(name.startswith(("update", "click", "pick_head", "first_screen", "lambda")) for name in tools)


def test_no_tool_shows_a_server_path(app_url):
    """A tool's defaults are published: none may name a file on the server (its cache, the checkout)."""
    import tempfile

    from gradio.utils import get_upload_folder

    from attention.config import ROOT

    tools = schema(app_url)
    text = json.dumps(tools)
    for where in (get_upload_folder(), tempfile.gettempdir(), str(ROOT)):
        assert where not in text, where
    assert any(name.endswith("patch_attention") for name in tools)  # the endpoint that had one is still a tool


def _png(i: int, side: int = 48) -> bytes:
    buf = io.BytesIO()
    Image.fromarray((np.random.default_rng(9000 + i).random((side, side)) * 255).astype("uint8")).save(buf, "PNG")
    return buf.getvalue()


def _files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


def test_sixty_mcp_data_files_are_swept_so_each_leaves_only_gradios_tracked_upload(app_url):
    """60 MCP calls from one client, each with its own `data:` PNG (3 at a time: 1 running and 2 waiting in
    the MCP lane, so none is refused before Gradio has written and uploaded the file). Gradio writes each to
    the swept folder (`server.MCP_COPIES`, none elsewhere), and once older than MCP_COPY_AGE the sweep deletes
    them all: what stays of each is one file, the loopback upload Gradio tracks and deletes at ATTENTION_FILE_TTL like
    every visitor's (before: a second, untracked copy of every call's file, kept for good)."""
    folder = Path(get_upload_folder())
    copies = folder / server.MCP_COPIES
    pngs = [_png(i) for i in range(60)]
    before = _files(folder)

    def call(i: int) -> int:
        data = "data:image/png;base64," + base64.b64encode(pngs[i]).decode()
        body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "attention_maps"}}
        body["params"]["arguments"] = {"image": data, "model": "mnist_vit"}
        headers = {"Accept": "application/json, text/event-stream", "X-Forwarded-For": "10.77.0.1"}
        return httpx.post(app_url + "gradio_api/mcp/", json=body, headers=headers, timeout=300).status_code

    with ThreadPoolExecutor(1 + SETTINGS.visitor_queued) as pool:
        codes = list(pool.map(call, range(60)))
    assert codes == [200] * 60, codes
    new = _files(folder) - before
    written = [p for p in new if p.read_bytes() in pngs]
    assert sum(copies in p.parents for p in written) == 60  # every data: file Gradio wrote, in the swept folder
    old = time.time() - 2 * server.MCP_COPY_AGE
    for d in copies.iterdir():
        os.utime(d, (old, old))
    server.sweep_mcp_copies(folder)
    assert not _files(copies)
    kept = Counter(p.read_bytes() for p in written if p.exists())
    assert len(kept) == 60 and max(kept.values()) == 1, sorted(kept.values())


class Tools:
    """A light tool (`light`: counts how many of its calls are inside at once, waits for `hold`) and a heavy one
    (`heavy`, in Gradio's heavy concurrency group), each event letting 16 run at once: only the MCP lane
    holds them back."""

    def __init__(self):
        self.lock, self.hold = threading.Lock(), threading.Event()
        self.hold.set()
        self.inside = self.most = self.calls = 0

    @contextlib.contextmanager
    def holding(self):
        """Light calls wait inside while in this block (let go on leaving it, before its pool is joined)."""
        self.hold.clear()
        try:
            yield
        finally:
            self.hold.set()

    def light(self, text: str) -> str:
        """Echo the text after a short pause (a light tool).

        Args:
            text: any text, sent back as it came
        """
        with self.lock:
            self.inside, self.calls = self.inside + 1, self.calls + 1
            self.most = max(self.most, self.inside)
        try:
            time.sleep(0.2)
            self.hold.wait(60)
        finally:
            with self.lock:
                self.inside -= 1
        return text

    def heavy(self, text: str) -> str:
        """Echo the text (a heavy tool: the heavy lane admits it by its caller, not the MCP lane).

        Args:
            text: any text, sent back as it came
        """
        return text


@pytest.fixture(scope="module")
def tools():
    """(url, Tools) of a small app with those two tools, launched as the app is (`server.LaunchKwargs`: the
    guard signing each MCP caller, the MCP lane installed at launch)."""
    t = Tools()
    with gr.Blocks() as blocks:
        box, out = gr.Textbox(), gr.Textbox()
        gr.Button().click(t.light, box, out, api_name="light", concurrency_limit=16)
        heavy = HEAVY_QUEUE["concurrency_id"]
        gr.Button().click(t.heavy, box, out, api_name="heavy", concurrency_id=heavy, concurrency_limit=16)
    blocks.queue()
    launch = server.LaunchKwargs(SETTINGS, blocks, mcp_server=True)
    _, url, _ = blocks.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **launch)
    assert answers(url.rstrip("/") + "/gradio_api/info", 60, 0.2)
    yield url, t
    blocks.close()


def mcp_call(url: str, tool: str, arguments: dict, client: str, timeout: float = 120) -> dict:
    """The result of MCP tool `tool` called with `arguments` by a caller at address `client` (named as the trusted
    proxy on loopback names it, as `bench.abuse_heavy._mcp_call`'s clients are told apart)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    headers = {"Accept": "application/json, text/event-stream", "X-Forwarded-For": client}
    r = httpx.post(url + "gradio_api/mcp/", json=body, headers=headers, timeout=timeout)
    assert r.status_code == 200, r.text
    data = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:")]
    return data[-1]["result"]


def _until(cond, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.02)


def test_eight_mcp_callers_at_once_are_all_answered_at_most_the_lanes_slots_at_a_time(tools):
    url, t = tools
    t.most = t.calls = 0
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: mcp_call(url, "light", {"text": f"hi {i}"}, f"10.66.0.{i + 1}"), range(8)))
    assert [r.get("isError") for r in results] == [False] * 8, results  # 8 callers: 8 visitors, none refused
    assert [r["content"][0]["text"] for r in results] == [f"hi {i}" for i in range(8)]
    assert t.calls == 8 and 1 <= t.most <= MCP.slots == SETTINGS.mcp_slots, (t.calls, t.most)
    assert MCP.waiting() == 0 and MCP._busy == 0


def test_eight_agents_behind_one_address_wait_their_turns_none_refused(tools):
    """Eight MCP agents on one address (no MCP session: the address is the caller) at once: each call waits its
    turn in the MCP lane and is answered; none is refused (a refused agent would loop)."""
    url, t = tools
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: mcp_call(url, "light", {"text": f"a{i}"}, "10.66.4.1"), range(8)))
    assert [r.get("isError") for r in results] == [False] * 8, results
    _until(lambda: MCP.waiting() == 0 and MCP._busy == 0)


def test_an_addresss_calls_over_its_room_are_refused_as_a_tool_error_held_a_moment(tools, monkeypatch):
    """Past its address's room (made small here: ATTENTION_ADDRESS_WAITING is 64) a call is answered as a tool
    error that names the address as what is counted and when to retry, sized from the job holding the slot
    (not the lane's 60 s bound), held ATTENTION_REFUSAL_DELAY first."""
    url, t = tools
    monkeypatch.setattr(MCP, "address_queued", SETTINGS.visitor_queued)
    monkeypatch.setattr(admit, "SETTINGS", dataclasses.replace(SETTINGS, refusal_delay=0.5))
    with ThreadPoolExecutor(1 + SETTINGS.visitor_queued) as pool, t.holding():
        admitted = [
            pool.submit(mcp_call, url, "light", {"text": f"a{i}"}, "10.66.1.1") for i in range(pool._max_workers)
        ]
        _until(lambda: t.inside == 1 and MCP.waiting() == SETTINGS.visitor_queued)
        started = time.monotonic()
        refused = mcp_call(url, "light", {"text": "one too many"}, "10.66.1.1")
        assert 0.5 <= time.monotonic() - started < 5  # held a moment, not after the others
        assert refused["isError"] is True
        text = refused["content"][0]["text"]
        assert text.startswith("Not queued: your address (every session from it counts together)"), text
        assert re.search(r"Try again in about ([1-9]|1[0-9]) s", text) and "Traceback" not in text, text
        t.hold.set()
        assert [f.result(60)["isError"] for f in admitted] == [False] * len(admitted)
    _until(lambda: MCP.waiting() == 0 and MCP._busy == 0)


def test_a_heavy_tool_is_not_held_by_the_mcp_lane(tools):
    """Every MCP slot is held by a light call; a heavy call of another caller is answered meanwhile."""
    url, t = tools
    with ThreadPoolExecutor(MCP.slots) as pool, t.holding():
        light = [pool.submit(mcp_call, url, "light", {"text": "slow"}, f"10.66.2.{i + 1}") for i in range(MCP.slots)]
        _until(lambda: t.inside == MCP._busy == MCP.slots)
        heavy = mcp_call(url, "heavy", {"text": "fast"}, "10.66.3.1", timeout=10)
        assert heavy["isError"] is False and heavy["content"][0]["text"] == "fast"
        assert not any(f.done() for f in light)
        t.hold.set()
        assert [f.result(60)["isError"] for f in light] == [False] * MCP.slots


def test_the_gate_is_installed_once_and_refuses_a_gradio_without_what_it_wraps(tools):
    from types import SimpleNamespace

    import gradio.mcp
    import mcp.types

    with gr.Blocks() as blocks:
        box = gr.Textbox()
        box.submit(Tools().light, box, box, api_name="light")
    obj = gradio.mcp.GradioMCPServer(blocks)
    admit.gate_mcp_calls(obj)
    gated = obj.mcp_server.request_handlers[mcp.types.CallToolRequest]
    admit.gate_mcp_calls(obj)
    assert obj.mcp_server.request_handlers[mcp.types.CallToolRequest] is gated and gated.lane is MCP
    with pytest.raises(RuntimeError, match="gate_mcp_calls"):
        admit.gate_mcp_calls(SimpleNamespace(mcp_server=SimpleNamespace(request_handlers={})))


def test_the_apps_light_tools_are_in_the_mcp_lane_and_eight_callers_at_once_are_all_answered(app_url):
    """The app launched as served: its MCP server's tool calls gated at launch, the heavy endpoints' tools
    (Gradio's heavy concurrency group) passing; 8 MCP clients calling /attention_maps at once (bench_abuse's
    mcp_clients) are 8 visitors, every call answered."""
    import mcp.types

    import app

    gated = app.demo.mcp_server_obj.mcp_server.request_handlers[mcp.types.CallToolRequest]
    assert gated.lane is MCP
    assert {"relevance", "text_relevance", "attention_video"} <= gated.heavy and "attention_maps" not in gated.heavy
    arguments = {"image": "data:image/png;base64," + base64.b64encode(_png(1, 28)).decode(), "model": "mnist_vit"}
    with ThreadPoolExecutor(8) as pool:
        results = list(
            pool.map(lambda i: mcp_call(app_url, "attention_maps", arguments, f"10.55.0.{i + 1}", 300), range(8))
        )
    assert [r.get("isError") for r in results] == [False] * 8, [r["content"][0] for r in results if r.get("isError")]
