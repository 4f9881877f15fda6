"""MCP: the app serves its API endpoints as tools, each parameter described for the assistant; the `data:`
files of MCP calls are swept."""

from __future__ import annotations

import base64
import io
import json
import os
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
from gradio.utils import get_upload_folder
from PIL import Image

from attention.ui import server


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
    from attention.ui.api_docs import ARGS

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
    """60 MCP calls from one client, each with its own `data:` PNG (4 at a time: most are refused as busy,
    after Gradio has written and uploaded the file). Gradio writes each to the swept folder
    (`server.MCP_COPIES`, none elsewhere), and once older than MCP_COPY_AGE the sweep deletes them all: what
    stays of each is one file, the loopback upload Gradio tracks and deletes at ATTENTION_FILE_TTL like
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

    with ThreadPoolExecutor(4) as pool:
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
