"""Spec of attention.vit.relevance.views: a relevance result drawn as three captioned overlays on the
image enlarged by a whole factor to at least 224 px, and an answer's files: a PNG sheet any decoder
opens, an .npz holding the result's own arrays, and the facts naming the class."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from attention.render import overlay
from attention.vit.models.loader import load_vit
from attention.vit.relevance import relevance
from attention.vit.relevance.views import CAPTIONS, enlarged, tiles, write_answer
from tests.conftest import DIGIT


@pytest.fixture(scope="module")
def rel():
    return relevance(load_vit("mnist_vit"), DIGIT, 3)


def test_the_image_is_enlarged_by_the_smallest_whole_factor_reaching_224_px(rel):
    big = enlarged(rel)
    assert big.shape == (224, 224, 3)  # 28 px x 8
    small = np.asarray(rel.image)
    np.testing.assert_array_equal(big[::8, ::8], small)  # nearest: each pixel an 8 x 8 block
    assert enlarged(rel, 20).shape == (28, 28, 3)


def test_three_captioned_overlays_of_the_same_pass(rel):
    ts = tiles(rel, alpha=0.5, cmap="viridis")
    assert [t.name for t in ts] == ["chefer", "grad_rollout", "attention"]
    assert ts[0].caption == "Why '3'? Relevance (Chefer et al. 2021)" and "any class" in ts[2].caption
    np.testing.assert_array_equal(ts[0].image, overlay(enlarged(rel), rel.chefer_map, alpha=0.5, cmap="viridis"))


def test_an_answers_files_hold_the_results_own_arrays(rel):
    pic, npz, facts = write_answer(rel, model="mnist_vit")
    assert Image.open(pic).format == "PNG"
    with np.load(npz) as d:
        for k, v in rel.arrays().items():
            np.testing.assert_array_equal(d[k], v)
        assert str(d["model"]) == "mnist_vit"
    assert facts["model"] == "mnist_vit" and facts["pictures"] == list(CAPTIONS)
    assert facts["captions"]["chefer"].startswith("Why '3'?")
