"""MCP: the app serves its API endpoints as tools, each parameter described for the assistant."""

from __future__ import annotations

import json
import urllib.request


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
