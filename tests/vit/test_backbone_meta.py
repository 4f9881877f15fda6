"""Meta's DINOv2 classes (the `dinov2` package, its 2023 release) through the engine, against the
explicit softmax of each block's own qkv projection: every layer, head, prefix and patch query,
square and non-square inputs, with and without block chunks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from attention.vit.backbone import describe
from attention.vit.extract import attention_maps
from tests.vit.backbone_oracle import assert_rows_match, input_of, meta_dinov2, meta_oracle

pytest.importorskip("dinov2.models.vision_transformer")


@pytest.mark.parametrize("chunks", [0, 3])
def test_every_layer_head_and_query_is_dinov2s_own_softmax(chunks):
    model = meta_dinov2(chunks)
    bb = describe(model)
    assert bb.library == "dinov2" and bb.prefix == ("cls",) and bb.depth == 3 and bb.patch == (14, 14)
    for gh, gw in ((2, 2), (2, 3)):
        x = torch.randn(2, 3, gh * 14, gw * 14)
        assert_rows_match(model, x, meta_oracle(model, x), 1)


def test_attention_maps_on_a_dinov2_object_feeds_it_as_dino_does():
    model = meta_dinov2()
    bb = describe(model)
    assert (bb.crop, bb.default_resolution) == ("top-left", 480)
    img = Image.fromarray((np.random.default_rng(1).random((45, 60, 3)) * 255).astype(np.uint8))
    res = attention_maps(model, img, resolution="native", keep_qk=True)
    assert res.grid == (3, 4) and res.query == "cls"
    x = input_of(res, bb)
    ref = meta_oracle(model, x)
    for layer in range(3):
        np.testing.assert_allclose(res.weights[layer], ref[layer][0, :, 0].numpy(), atol=1e-4)
    np.testing.assert_allclose(res.requery((2, 3)).weights[-1], ref[-1][0, :, 1 + 2 * 4 + 3].numpy(), atol=1e-4)
