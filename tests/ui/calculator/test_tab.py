"""The calculator's API endpoints, through gradio_client against the running app."""

from __future__ import annotations

import numpy as np
import pytest
from gradio_client import handle_file

from tests.conftest import ROOT


def test_calculate_returns_every_step_and_a_torch_check(client):
    r = client.predict(
        "1 0 0; 0 1 0; 1 1 1", "1 0 0\n0 1 0\n0 0 1\n0 0 0", "[[0, 1], [2, 3], [4, 5], [6, 7]]", api_name="/calculate"
    )
    Q, K = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 1]]), np.eye(4, 3)
    scores = Q @ K.T
    np.testing.assert_allclose(r["scores"], [scores])
    e = np.exp(scores / np.sqrt(3))
    w = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(r["weights"], [w])
    np.testing.assert_allclose(r["output"], w @ np.arange(8).reshape(4, 2))
    assert r["checks"][0]["ok"] is True and "scaled_dot_product_attention" in r["checks"][0]["message"]


def test_calculate_with_heads_causal_mask_and_custom_scale(client):
    r = client.predict(
        Q="1 2 3 4; 0 1 0 1; 2 2 2 2",
        K="1 0 1 0; 0 0 1 1; 3 1 0 2",
        V="1 2; 3 4; 5 6",
        heads=2,
        scale_mode="custom",
        scale=0.25,
        mask_mode="causal",
        api_name="/calculate",
    )
    assert r["heads"] == 2 and r["scale"] == 0.25
    masked = np.array(r["masked"], dtype=float)  # null (masked) -> nan
    assert np.isnan(masked[:, 0, 1:]).all() and not np.isnan(masked[:, 2]).any()
    np.testing.assert_allclose(np.array(r["weights"]).sum(-1), 1.0)
    assert np.array(r["output"]).shape == (3, 2) and r["checks"][0]["ok"]


def test_custom_mask_with_an_empty_row_gets_a_note(client):
    r = client.predict(Q="1 0; 0 1", K="1 0; 0 1", V="1; 2", mask_mode="custom", mask="1 1; 0 0", api_name="/calculate")
    assert r["weights"][0][1] == [0, 0] and r["output"][1] == [0]
    assert any("no key" in n for n in r["notes"])


def test_calculate_from_x_checks_multihead_attention(client):
    rng = np.random.default_rng(0)
    X, *W = (np.round(rng.normal(size=(4, 4)), 2) for _ in range(5))
    txt = [str(a.tolist()) for a in (X, *W)]
    r = client.predict(*txt, heads=2, api_name="/calculate_from_x")
    assert np.array(r["output"]).shape == (4, 4) and np.array(r["weights"]).shape == (2, 4, 4)
    np.testing.assert_allclose(r["Q"], X @ W[0])
    assert [c["ok"] for c in r["checks"]] == [True, True]
    assert "MultiheadAttention" in r["checks"][1]["message"]


@pytest.mark.parametrize(
    "args, words",
    [
        (("1 2; 3", "1 2", "1"), ["ragged"]),
        (("1 x", "1 2", "1"), ["'x'", "not a number"]),
        (("1 2 3", "1 2", "1"), ["1 x 3", "1 x 2", "columns"]),
        (("1 nan", "1 2", "1"), ["finite"]),
        (("", "1 2", "1"), ["empty"]),
    ],
)
def test_bad_input_gives_a_clear_message_and_the_server_stays_up(client, args, words):
    with pytest.raises(Exception) as e:
        client.predict(*args, api_name="/calculate")
    for w in words:
        assert w in str(e.value)
    assert client.predict("1", "1", "1", api_name="/calculate")["output"] == [[1.0]]


def test_bad_heads_and_mask_shape(client):
    with pytest.raises(Exception, match="2 heads must split d = 3"):
        client.predict("1 2 3", "1 2 3", "1 2", heads=2, api_name="/calculate")
    with pytest.raises(Exception, match="mask is 2 x 2 but the scores are 1 x 1"):
        client.predict("1", "1", "1", mask_mode="custom", mask="1 0; 0 1", api_name="/calculate")


def test_patch_attention_endpoint(client):
    photo = ROOT / "examples" / "photos" / "chelsea.jpg"
    src = photo if photo.exists() else ROOT / "examples" / "digits" / "digit_3.png"
    grid, maps, mats, info, index = client.predict(handle_file(str(src)), 32, 2, 0, 5, api_name="/patch_attention")
    from PIL import Image

    w, h = Image.open(src).size
    rows, cols = round(h * 224 / max(w, h)) // 32, round(w * 224 / max(w, h)) // 32
    assert index["value"] == 5 and index["maximum"] == rows * cols - 1
    assert f"{rows} x {cols} = {rows * cols} patches" in info

    assert Image.open(grid).size == (2 * cols * 32, 2 * rows * 32)  # drawn at 2x
    assert Image.open(mats).size[0] > Image.open(mats).size[1]  # two heads side by side
