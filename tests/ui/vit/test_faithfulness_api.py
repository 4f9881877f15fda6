"""/faithfulness through gradio_client and as an MCP tool: the view's AUCs against a random order's, equal to
the package's score of the same map computed here from `attention_maps` (the view "mean": the last layer's
mean of heads); the curves as a picture and a .json; a bad view named with what is accepted; an over-budget job
refused before it runs; concurrent callers each get their own digit's."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from gradio_client import handle_file

from attention.config import EXAMPLES_DIR
from attention.vit.engine.extract import attention_maps
from attention.vit.models.loader import load_vit
from attention.vit.score import score_maps, scorer
from tests.conftest import DIGIT
from tests.ui.common.test_mcp import schema


def test_the_mean_views_scores_are_the_packages_for_that_map(client):
    pic, data, info = client.predict(handle_file(DIGIT), "mnist_vit", "mean", -1, 0, None, None, "auto",
                                     api_name="/faithfulness")  # fmt: skip
    model = load_vit("mnist_vit", device="cpu")
    m = attention_maps(model, DIGIT).layers[-1].mean(0)
    want = score_maps(scorer(model), DIGIT, {"shown": m, "random": np.random.default_rng(0).random((7, 7))},
                      protocols=["perturbation"])  # fmt: skip
    for name in ("shown", "random"):
        for k in ("auc_positive", "auc_negative"):
            assert info[name][k] == pytest.approx(getattr(want.maps[name], k), abs=2e-6)
    assert info["answer"]["label"] == "3" and "Faithfulness here" in info["line"]
    assert pic.endswith(".png") and len(json.loads(open(data).read())["curves"]["shown"]["positive"]) == 10


def test_a_bad_view_is_named_with_what_is_accepted(client):
    with pytest.raises(Exception, match="accepted"):
        client.predict(handle_file(DIGIT), "mnist_vit", "sideways", api_name="/faithfulness")


def test_an_over_budget_job_is_refused_before_it_runs(client, monkeypatch):
    from attention.vit.score import service

    monkeypatch.setattr(service, "budget", lambda device: 0.01)
    with pytest.raises(Exception, match="GFLOP per faithfulness job"):
        client.predict(handle_file(DIGIT), "mnist_vit", "rollout", api_name="/faithfulness")


def test_concurrent_callers_each_get_their_own_digit(visitor_client):
    digits = [str(EXAMPLES_DIR / "digits" / f"digit_{i}.png") for i in range(4)]
    clients = [visitor_client(300 + i) for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        infos = list(
            pool.map(lambda i: clients[i].predict(handle_file(digits[i]), api_name="/faithfulness")[2], range(4))
        )
    model = load_vit("mnist_vit", device="cpu")
    sc = scorer(model)
    assert [i["answer"]["index"] for i in infos] == [int(sc.predict(load_x(model, d)).argmax()) for d in digits]


def load_x(model, path):
    from attention.vit.engine.preprocess import Preprocess

    return Preprocess.of(model)(path).x[None]


def test_the_faithfulness_tool_describes_every_parameter(app_url):
    tool = schema(app_url)["faithfulness"]
    assert "perturbation" in tool["description"]
    props = tool["inputSchema"]["properties"]
    assert set(props) == {"image", "model", "view", "layer", "head", "query_row", "query_col", "resolution"}
    assert "mnist_vit" in props["model"]["description"] and "rollout" in props["view"]["description"]


def test_the_faithfulness_tool_answers_over_mcp_in_the_heavy_lane(app_url):
    import base64

    import mcp

    import app
    from tests.ui.common.test_mcp import mcp_call

    gated = app.demo.mcp_server_obj.mcp_server.request_handlers[mcp.types.CallToolRequest]
    assert "faithfulness" in gated.heavy  # admitted by the heavy lane, not held in the MCP lane
    image = "data:image/png;base64," + base64.b64encode(open(DIGIT, "rb").read()).decode()
    r = mcp_call(app_url, "faithfulness", {"image": image, "model": "mnist_vit", "view": "rollout"}, "10.56.0.1")
    assert r.get("isError") is False, r["content"]
    assert "auc_positive" in json.dumps(r["content"])
