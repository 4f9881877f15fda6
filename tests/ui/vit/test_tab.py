"""Spec of the ViT tab's API, `/attention_maps`, through gradio_client on the app launched
in-process (offline: HF_HUB_OFFLINE=1, so the app's default model is the shipped mnist_vit).
Its bad inputs are in tests/ui/common/test_bad_input.py, with every other endpoint's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError
from PIL import Image

ROOT = Path(__file__).resolve().parents[3]
DIGIT = str(ROOT / "examples" / "digits" / "digit_3.png")
PHOTO = str(ROOT / "examples" / "photos" / "chelsea.jpg")


def maps(client, image=DIGIT, **kw):
    """Call /attention_maps; returns (the sheet PNG path, the info dict, np.load of the .npz)."""
    sheet, npz, info = client.predict(handle_file(image), **kw, api_name="/attention_maps")
    return sheet, info, np.load(npz)


def test_the_endpoint_is_documented_with_defaults_after_image(client):
    info = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/attention_maps"]
    params = [(p["parameter_name"], p["parameter_has_default"], p["parameter_default"]) for p in info["parameters"]]
    assert [p[0] for p in params] == [
        "image",
        "model",
        "layer",
        "resolution",
        "view",
        "threshold",
        "query_row",
        "query_col",
        "head_fusion",
        "discard_ratio",
        "discard",
    ]
    assert not params[0][1] and all(p[1] for p in params[1:])
    defaults = {p[0]: p[2] for p in params}
    assert defaults["model"] == "mnist_vit"  # offline start-up choice
    assert (defaults["layer"], defaults["resolution"], defaults["view"], defaults["threshold"]) == (
        -1,
        "auto",
        "heads",
        0.6,
    )
    assert defaults["query_row"] is None and defaults["query_col"] is None
    assert (defaults["head_fusion"], defaults["discard_ratio"], defaults["discard"]) == ("mean", 0.0, "row")


def test_default_call_returns_a_sheet_of_head_overlays_the_raw_maps_and_the_facts(client):
    sheet, info, d = maps(client)
    tiles = info["tiles"]
    assert len(tiles) == 4 + 1  # 4 heads, then their mean
    assert [t["caption"].split(" · ")[0] for t in tiles] == ["head 0", "head 1", "head 2", "head 3", "mean of heads"]
    img = Image.open(sheet)  # the 224 px tiles (28 px shown 8x) in rows of 4, captioned
    assert img.format == "PNG" and img.size == (4 * (224 + 4) + 4, 2 * (224 + 14 + 4) + 4)
    assert info["model"] == "mnist_vit" and info["grid"] == [7, 7] and info["patch_size"] == 4
    assert (info["layer"], info["num_layers"], info["num_heads"], info["query"]) == (3, 4, 4, "cls")
    assert info["tokens"] == 50 and info["device"] == "cpu" and info["forward_ms"] > 0 and info["render_ms"] > 0
    assert d["maps"].dtype == np.float32 and d["maps"].shape == (4, 7, 7) and d["image"].shape == (28, 28, 3)
    np.testing.assert_allclose(d["maps"].mean(0), d["mean"], rtol=1e-6)
    assert d["layers"].shape == (4, 4, 7, 7) and int(d["layer"]) == 3
    assert d["query"].tolist() == [-1, -1] and str(d["model"]) == "mnist_vit"
    assert not [n for n in d.files if n.startswith("png/")]  # the arrays alone: the overlays are the sheet


def test_a_patch_query_returns_other_maps_than_cls(client):
    _, _, cls = maps(client, layer=1)
    _, info, patch = maps(client, layer=1, query_row=3, query_col=4)
    assert patch["query"].tolist() == [3, 4] and int(patch["layer"]) == 1 and info["query"] == [3, 4]
    assert cls["maps"].shape == patch["maps"].shape
    assert np.abs(cls["maps"] - patch["maps"]).max() > 1e-3
    np.testing.assert_allclose(patch["weights"].sum(-1), 1, rtol=1e-4)


def test_rollout_of_a_patch_query_differs_from_the_cls_rollout(client):
    _, _, cls = maps(client, view="rollout")
    _, info, patch = maps(client, view="Rollout", query_row=1, query_col=5)  # the view's label works too
    assert info["view"] == "rollout" and patch["rollout"].shape == cls["rollout"].shape == (7, 7)
    assert np.abs(cls["rollout"] - patch["rollout"]).max() > 1e-3


def test_rollout_options_are_the_packages(client):
    from attention.vit.engine.flow import rollout_map
    from attention.vit.serve.passes import get_pass

    opts = dict(head_fusion="max", discard_ratio=0.5, discard="global")
    _, info, d = maps(client, view="rollout", layer=2, **opts)
    want = rollout_map(get_pass(DIGIT, "mnist_vit", "auto").at("cls", 2), **opts)
    np.testing.assert_allclose(d["rollout"], want, rtol=1e-6)
    assert "max of heads, lowest 50% dropped (whole matrix, CLS kept)" in info["tiles"][0]["caption"]
    _, _, plain = maps(client, view="rollout", layer=2)
    assert np.abs(plain["rollout"] - d["rollout"]).max() > 1e-3
    with pytest.raises(AppError, match="Head fusion 'median' is not accepted"):
        maps(client, view="rollout", head_fusion="median")


@pytest.mark.parametrize("view, n", [("mean", 1), ("rollout", 1), ("masks", 4)])
def test_each_view(client, view, n):
    _, info, d = maps(client, view=view, threshold=0.5)
    assert len(info["tiles"]) == n and str(d["view"]) == view == info["view"]
    assert ("rollout" in d.files) == (view == "rollout")
    if view == "masks":
        assert d["masks"].shape == (4, 7, 7) and all("hold 50%" in t["caption"] for t in info["tiles"])


def test_resolution_changes_the_grid(client):
    _, _, d = maps(client, resolution="56")
    assert d["maps"].shape == (4, 14, 14) and d["image"].shape == (56, 56, 3)


@pytest.mark.parametrize("mode", ["CMYK", "I;16", "RGBA", "L", "P"])
def test_any_image_mode_is_accepted(client, tmp_path, mode):
    digit = Image.open(DIGIT).convert("L")
    if mode == "I;16":
        img = Image.fromarray(np.asarray(digit).astype(np.uint16) * 257)
    elif mode == "RGBA":
        img = digit.convert("RGBA")
        img.putalpha(200)
    else:
        img = digit.convert(mode)
    path = tmp_path / f"digit.{'jpg' if mode == 'CMYK' else 'png'}"
    img.save(path)
    assert Image.open(path).mode.startswith(mode[:3])
    _, info, d = maps(client, image=str(path))
    assert len(info["tiles"]) == 5 and d["maps"].shape == (4, 7, 7)


@pytest.mark.subprocess
def test_a_bad_setting_stops_start_up_with_its_name_and_no_traceback():
    env = {**os.environ, "ATTENTION_CONCURRENCY": "soon", "HF_HUB_OFFLINE": "1"}
    r = subprocess.run(
        [sys.executable, "-c", "import app"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 1 and "ATTENTION_CONCURRENCY='soon' is not accepted; expected a int >= 1" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_request_over_the_compute_budget_is_refused_at_once_naming_what_fits(client, monkeypatch):
    import dataclasses
    import time

    from attention.vit.serve import passes

    monkeypatch.setattr(passes, "SETTINGS", dataclasses.replace(passes.SETTINGS, gflop_cpu=2.0))
    t0 = time.perf_counter()
    with pytest.raises(AppError) as e:
        client.predict(handle_file(PHOTO), model="mnist_vit", resolution="2000", api_name="/attention_maps")
    assert time.perf_counter() - t0 < 1.0
    msg = str(e.value)
    assert "over this server's budget of 2 GFLOP per pass on cpu" in msg and "largest resolution accepted" in msg
    best = int(msg.split("image is ")[1].split(" px")[0])
    _, info, _ = maps(client, PHOTO, model="mnist_vit", resolution=str(best))  # what it names runs
    assert info["grid"]
