"""/feature_maps through gradio_client: one picture, one .npz with exactly the feature arrays, the facts."""

from __future__ import annotations

import numpy as np
import pytest
from gradio_client import handle_file

from attention.vit.serve import passes
from tests.conftest import DIGIT


def features(client, **kw):
    pic, npz, info = client.predict(handle_file(DIGIT), **kw, api_name="/feature_maps")
    return pic, np.load(npz), info


def test_feature_maps_answers_one_picture_one_npz_and_the_facts(client):
    pic, arrays, info = features(client, model="mnist_vit", query_row=3, query_col=2)
    assert pic.endswith(".png")
    assert sorted(arrays.files) == ["grid", "image", "meta", "norms", "pca", "similarity"]
    assert arrays["pca"].shape == (7, 7, 3) and arrays["pca"].dtype == np.float32
    assert arrays["similarity"].shape == arrays["norms"].shape == (7, 7)
    assert arrays["similarity"][3, 2] == pytest.approx(1.0, abs=1e-6)
    assert arrays["grid"].tolist() == [7, 7] and arrays["image"].shape == (28, 28, 3)
    assert info["query"] == [3, 2] and info["layer"] == 3 and set(info["explain"]) == {"pca", "similarity", "norms"}


def test_feature_maps_equal_the_packages(client):
    _, arrays, _ = features(client, model="mnist_vit", layer=1)
    want = passes.get_pass(DIGIT, "mnist_vit", "auto").feature_maps("cls", 1)
    for k in ("pca", "similarity", "norms"):
        np.testing.assert_array_equal(arrays[k], want[k])


def test_pca_background_drops_the_low_patches_as_the_package_does(client):
    _, arrays, _ = features(client, model="mnist_vit", pca_background=0.5)
    want = passes.get_pass(DIGIT, "mnist_vit", "auto").feature_maps("cls", -1, background=0.5)
    np.testing.assert_array_equal(arrays["pca"], want["pca"])
    assert (arrays["pca"] == 0).all(-1).any()  # some patches are background


def test_dinov3_pca_style_answers_the_packages_view_and_its_foreground(client):
    _, arrays, info = features(client, model="mnist_vit", pca="dinov3")
    want = passes.get_pass(DIGIT, "mnist_vit", "auto").feature_maps("cls", -1, pca_style="dinov3")
    assert sorted(arrays.files) == ["foreground", "grid", "image", "meta", "norms", "pca", "similarity"]
    np.testing.assert_array_equal(arrays["pca"], want["pca"])
    np.testing.assert_array_equal(arrays["foreground"], want["foreground"])
    assert (arrays["pca"][~arrays["foreground"]] == 0).all() and info["pca_style"] == "dinov3"
    assert "DINOv3 style" in info["captions"][0]


@pytest.mark.parametrize(
    "kw, fragment",
    [
        (dict(pca="fancy"), "PCA style 'fancy' is not known; accepted: minmax, dinov3"),
        (dict(layer=7), "Layer 7 is out of range"),
        (dict(query_row=9, query_col=0), "off the 7x7 grid"),
        (dict(query_row=2), "Give both query_row and query_col"),
        (dict(pca_background=1.5), "PCA background threshold 1.5 is out of range"),
    ],
)
def test_bad_feature_requests_say_what_is_accepted(client, kw, fragment):
    with pytest.raises(Exception, match=fragment):
        features(client, model="mnist_vit", **kw)


def test_a_dinov3_answers_both_endpoints(client, tmp_path):
    """A tiny DINOv3 in the Hub cache's layout (rotary positions, 4 registers) through /attention_maps (rollout)
    and /feature_maps (DINOv3's PCA): the grid its notebooks' resize gives, no refusal."""
    from tests.hub_cache import DINOV3_REPO, add_tiny_dinov3, temporary_hf_home

    with temporary_hf_home(tmp_path / "hf") as add:
        add_tiny_dinov3(add)
        model = f"hf-hub:{DINOV3_REPO}"
        _, npz, info = client.predict(
            handle_file(DIGIT), model=model, resolution="64", view="rollout", api_name="/attention_maps"
        )
        with np.load(npz) as z:  # 28x28 digit at 64 px high: 4 rows, floor(28 * 64 / (28 * 16)) = 4 columns
            assert z["maps"].shape == (2, 4, 4) and int(z["num_prefix_tokens"]) == 5
        assert info["model"] == model
        _, arrays, info = features(client, model=model, resolution="64", pca="dinov3")
        assert arrays["pca"].shape == (4, 4, 3) and arrays["foreground"].shape == (4, 4)
