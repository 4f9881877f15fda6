"""/relevance through gradio_client and as an MCP tool: one picture, one .npz with the package's maps and
class scores, the facts; a bad target named with what is accepted; concurrent callers get their own."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from gradio_client import handle_file

from attention.config import EXAMPLES_DIR
from attention.vit.models.loader import load_vit
from attention.vit.relevance import relevance
from tests.conftest import DIGIT
from tests.ui.common.test_mcp import schema


def test_relevance_answers_a_picture_the_maps_and_the_top_classes(client):
    pic, npz, info = client.predict(handle_file(DIGIT), "mnist_vit", "8", "auto", api_name="/relevance")
    assert pic.endswith(".png")
    arrays = np.load(npz)
    want = relevance(load_vit("mnist_vit", device="cpu"), DIGIT, 8)
    for k in ("chefer", "grad_rollout", "attention"):
        assert arrays[k].shape == (7, 7)
        np.testing.assert_allclose(arrays[k], getattr(want, f"{k}_map"), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(arrays["probs"], want.probs, rtol=1e-5)
    assert int(arrays["target"]) == 8 and info["target"]["name"] == "8"
    assert [t["name"] for t in info["top"]][:1] == ["3"] and len(info["top"]) == 5
    assert "Chefer" in info["captions"]["chefer"]


def test_an_empty_target_explains_the_top_class(client):
    _, _, info = client.predict(handle_file(DIGIT), api_name="/relevance")
    assert info["model"] == "mnist_vit" and info["target"]["index"] == 3


def test_a_bad_target_is_named_with_what_is_accepted(client):
    with pytest.raises(Exception, match="accepted: an index 0 to 9"):
        client.predict(handle_file(DIGIT), "mnist_vit", "12", "auto", api_name="/relevance")


def test_concurrent_callers_each_get_their_own_digit(visitor_client):
    digits = [str(EXAMPLES_DIR / "digits" / f"digit_{i}.png") for i in range(6)]
    clients = [visitor_client(200 + i) for i in range(6)]  # six visitors (one visitor has 1 running, 2 waiting)
    with ThreadPoolExecutor(6) as pool:
        infos = list(pool.map(lambda i: clients[i].predict(handle_file(digits[i]), api_name="/relevance")[2], range(6)))
    model = load_vit("mnist_vit", device="cpu")
    assert [i["target"]["index"] for i in infos] == [relevance(model, d).target for d in digits]


def test_the_relevance_tool_describes_every_parameter(app_url):
    tool = schema(app_url)["relevance"]
    assert "classifier" in tool["description"]
    props = tool["inputSchema"]["properties"]
    assert set(props) == {"image", "model", "target", "resolution"}
    assert "mnist_vit" in props["model"]["description"] and "top class" in props["target"]["description"]
