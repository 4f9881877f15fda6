"""A ViT class the package does not know, described by its user (issue 47): refused by name before, read exactly
after `register_backbone(MyViT, LAYOUT)` (every layer, head and token against the full softmax(q k^T / sqrt(d)) of
its own projections, computed here), through attention_maps and relevance (Chefer's rule with full matrices), on
its fused and its explicit path; the built-in libraries are registry entries like it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attention
from attention.errors import InputError, UnsupportedModelError
from attention.vit.backbone import describe, entries, library_of
from attention.vit.engine.preprocess import prepare
from tests.vit.backbone.custom_vit import LAYOUT, MyViT, tiny
from tests.vit.backbone_oracle import assert_rows_match, own_softmax
from tests.vit.relevance.test_compute import deviation
from tests.vit.relevance_reference import chefer_row


@pytest.fixture()
def registered():
    entry = attention.register_backbone(MyViT, LAYOUT, name="my_vit")
    yield entry
    attention.unregister_backbone("my_vit")


def full_attention(model: MyViT, x: torch.Tensor) -> list[torch.Tensor]:
    """Each block's softmax(q k^T / sqrt(d)) (B, H, N, N) in float64, from its own to_qkv on the block's input."""

    def qk(mixer, t):
        q, k, _ = mixer.qkv(t)
        return q, k, q.shape[-1] ** -0.5

    return own_softmax([b.mixer for b in model.layers], qk, lambda: model.tokens(x))


def test_an_unknown_class_is_refused_naming_the_way_to_describe_it():
    with pytest.raises(UnsupportedModelError, match=r"MyViT .*register_backbone"):
        describe(tiny())


@pytest.mark.parametrize("explicit", [False, True])
def test_a_registered_vit_is_read_exactly(registered, explicit):
    model = tiny()
    for b in model.layers:
        b.mixer.explicit = explicit
    bb = describe(model)
    assert library_of(model) == "my_vit" and bb.prefix == ("cls", "reg0", "reg1") and bb.heads == 4
    x = torch.randn(2, 3, 32, 32)
    assert_rows_match(model, x, full_attention(model, x), bb.num_prefix_tokens)
    res = attention.attention_maps(model, np.zeros((40, 50, 3), np.uint8), query="reg1")
    assert res.maps.shape == (4, 4, 4)  # its fixed 32 px: a 4 x 4 grid, 4 heads


def test_relevance_on_a_registered_classifier_is_chefers_rule(registered):
    model = tiny()
    image = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    rel = attention.relevance(model, image, "dog")
    x, _, _ = prepare(model, image, "auto", 16384, None)
    ref = tiny()  # the same weights on its explicit path: A in the graph, dLogit/dA by autograd
    for b in ref.layers:
        b.mixer.explicit = True
    with torch.enable_grad():
        logits = ref(x)[0]
        kept = [b.mixer.seen for b in ref.layers]
        for a in kept:
            a.retain_grad()
        logits[1].backward()
    A, G = torch.stack([a[0].detach() for a in kept]), torch.stack([a.grad[0] for a in kept])
    assert rel.target == 1 and rel.names == ("cat", "dog", "bird")
    assert deviation(rel.chefer, chefer_row(A, G).numpy(), 3) < 1e-5


def test_the_builtin_libraries_are_entries_after_the_users(registered):
    names = [e.name for e in entries()]
    assert names[0] == "my_vit"
    assert names[1:] == ["timm", "transformers", "open_clip", "torchvision", "meta", "timm"]
    attention.unregister_backbone("my_vit")
    assert [e.name for e in entries()][0] == "timm"


def test_a_layout_that_does_not_fit_is_refused_naming_the_path():
    attention.register_backbone(MyViT, attention.Layout(blocks="blocks"), name="wrong")
    try:
        with pytest.raises(UnsupportedModelError, match=r"no 'blocks'"):
            describe(tiny())
    finally:
        attention.unregister_backbone("wrong")
    with pytest.raises(InputError, match="accepted: a torch.nn.Module class"):
        attention.register_backbone(42, LAYOUT)
