"""One patch's row of the last block's attention under each open-vocabulary rule beside the model's own
(`attention.vit.text.patchrow`), against the papers' whole matrices (tests/vit/openvocab_reference.py) on the
tiny random CLIP of the rules' tests: a non-square grid, a corner and an inner patch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from attention.errors import InputError
from attention.vit.engine.capture import recording
from attention.vit.engine.preprocess import prepare
from attention.vit.text.dense import LastKernel
from attention.vit.text.openvocab import RuleOptions
from attention.vit.text.patchrow import patch_rows, rows_of
from attention.vit.text.tower import ready
from tests.vit import openvocab_reference as ref
from tests.vit.test_open_vocabulary import _proxy, _tiny

TOL = 1e-5


def _image(size) -> Image.Image:
    return Image.fromarray(np.random.default_rng(size[1]).integers(0, 255, (*size, 3), dtype=np.uint8))


def test_each_rules_row_and_the_models_own_equal_the_whole_matrices():
    clip = _tiny("clip")
    img = _image((48, 80))  # a 3 x 5 grid: rows and columns told apart
    x, _, grid = prepare(ready(clip).trunk, img, "native", 10_000, None)
    for patch in ((0, 0), (grid[0] - 1, 2)):
        i = 1 + patch[0] * grid[1] + patch[1]  # after the class token
        own = ref.attention(clip, x, "own")[:, i].mean(0)
        for rule in ("maskclip", "sclip", "clearclip", "naclip"):
            kw = {"std": 1.5} if rule == "naclip" else {}
            pr = patch_rows(clip, img, rule, patch, options=RuleOptions(**kw), resolution="native")
            want = ref.attention(clip, x, rule, **kw)[:, i].mean(0)
            assert pr.own.shape == pr.rule.shape == grid and pr.patch == patch
            assert (pr.own.flatten() - own[1:]).abs().max() <= TOL, rule
            assert (pr.rule.flatten() - want[1:]).abs().max() <= TOL, rule
            assert abs(pr.prefix[0] - float(own[0])) <= TOL and abs(pr.prefix[1] - float(want[0])) <= TOL
            total = 2.0 if rule == "sclip" else 1.0  # SCLIP sums two softmax rows
            assert abs(float(pr.rule.sum()) + pr.prefix[1] - total) <= 1e-4


def test_the_proxy_rules_row_is_its_similarity_softmax_over_the_patches():
    clip = _tiny("clip")
    trunk = ready(clip).trunk
    x, _, grid = prepare(trunk, _image((48, 80)), "native", 10_000, None)
    feats = _proxy(grid[0] * grid[1])
    rec = LastKernel(len(trunk.blocks) - 1)
    with torch.no_grad(), recording(trunk, rec):
        trunk.forward_features(x)
    for index in (0, 7):
        own, got = rows_of(rec.kernel, grid, 1, "proxy", RuleOptions(), index, feats)
        assert (own - ref.attention(clip, x, "own")[:, 1 + index].mean(0)).abs().max() <= TOL
        want = ref.attention(clip, x, "proxy", proxy=feats)[0, index]
        assert got[0] == 0 and (got[1:] - want).abs().max() <= TOL


def test_a_patch_off_the_grid_or_a_gradient_rule_is_refused_by_name():
    clip = _tiny("clip")
    img = Image.new("RGB", (64, 48))
    with pytest.raises(InputError, match=r"off the 3 x 4 grid; accepted: rows 0 to 2, columns 0 to 3"):
        patch_rows(clip, img, "naclip", (3, 0), resolution="native")
    with pytest.raises(InputError, match="has no attention row; accepted: maskclip"):
        patch_rows(clip, img, "chefer", (0, 0), resolution="native")
    with pytest.raises(InputError, match="needs a proxy model"):
        patch_rows(clip, img, "proxy", (0, 0), resolution="native")
