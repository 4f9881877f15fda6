"""Class relevance (issue 22): the maps equal the papers' algorithms written with full N x N matrices and
autograd (tests/vit/relevance_reference.py) within 1e-5 of the map's peak, on the shipped mnist_vit and on
random-weight DeiT-distilled and plain ViT classifiers loaded through the real hub path; the top classes
carry their names; a backbone without a head is refused with a typed error."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch

from attention.errors import InputError
from attention.vit.engine.preprocess import prepare
from attention.vit.models.loader import load_vit
from attention.vit.relevance import NoClassifierError, class_names, relevance
from attention.vit.relevance.compute import relevance_rows
from tests.conftest import DIGIT
from tests.hub_cache import safetensors_bytes, temporary_hf_home
from tests.vit.engine.test_fidelity import photo
from tests.vit.relevance_reference import chefer_row, full_attention_and_grads, grad_rollout_row
from tests.vit.worst import record

TOL = 1e-5  # of the map's peak


def deviation(ours: np.ndarray, ref: np.ndarray, prefix: int) -> float:
    """max |ours - ref| over patch tokens / the peak of ref over patch tokens."""
    ref = np.asarray(ref, np.float64)[prefix:]
    return record(float(np.abs(np.asarray(ours, np.float64)[prefix:] - ref).max() / np.abs(ref).max()))


@pytest.fixture(scope="module")
def hub_classifiers(tmp_path_factory):
    """{tag: model} random-weight classifiers (q, k sharpened) loaded by load_vit from a temporary hub cache."""
    tags = ["deit_tiny_distilled_patch16_224.fb_in1k", "vit_tiny_patch16_224.augreg_in21k_ft_in1k"]
    with temporary_hf_home(tmp_path_factory.mktemp("hf_home")) as add:
        for i, tag in enumerate(tags):
            torch.manual_seed(i)
            src = timm.create_model(tag, pretrained=False).eval()
            with torch.no_grad():
                for blk in src.blocks:
                    blk.attn.qkv.weight[: 2 * blk.attn.qkv.in_features] *= 3.0  # peaked attention
                src.head.weight.mul_(20.0)  # a confident head: gradients far from zero
            add(f"timm/{tag}", {"model.safetensors": safetensors_bytes(src)})
        yield {tag.split(".")[0]: load_vit(tag, device="cpu") for tag in tags}


def check_against_reference(model, image, resolution, target=None, discard_ratio=0.9, chunk_bytes=64 << 20):
    x, _, _ = prepare(model, image, resolution, 16384, None)
    logits, t, ch, gr, att = relevance_rows(model, x, target, discard_ratio=discard_ratio, chunk_bytes=chunk_bytes)
    A, G, ref_logits, ref_t = full_attention_and_grads(model, x, target)
    P = model.num_prefix_tokens
    assert t == ref_t
    assert torch.allclose(logits, ref_logits, atol=1e-4)
    assert deviation(ch.numpy(), chefer_row(A, G).numpy(), P) < TOL
    assert deviation(gr.numpy(), grad_rollout_row(A, G, discard_ratio).numpy(), P) < TOL
    assert np.abs(att.numpy() - A[:, :, 0].numpy()).max() < TOL * A[:, :, 0].max().item()
    return ch, gr


@pytest.mark.parametrize("discard_ratio", [0.0, 0.9])
def test_mnist_vit_maps_equal_the_full_matrix_reference(discard_ratio):
    model = load_vit("mnist_vit", device="cpu")
    for target in (None, 8):
        check_against_reference(model, DIGIT, "auto", target, discard_ratio)


def test_chunked_rows_equal_one_chunk():
    """A few rows at a time (several chunks, the cut found in passes over them) gives the same maps."""
    model = load_vit("mnist_vit", device="cpu")
    ch, gr = check_against_reference(model, DIGIT, "auto", chunk_bytes=3 * 4 * 4 * 50 * 7)  # 7 rows a chunk
    x, _, _ = prepare(model, DIGIT, "auto", 16384, None)
    _, _, ch1, gr1, _ = relevance_rows(model, x)
    assert torch.allclose(ch, ch1, atol=1e-7) and torch.allclose(gr, gr1, atol=1e-7)


@pytest.mark.parametrize("name", ["deit_tiny_distilled_patch16_224", "vit_tiny_patch16_224"])
@pytest.mark.parametrize("size,resolution", [((224, 224), "auto"), ((120, 80), None)])
def test_hub_classifiers_equal_the_full_matrix_reference(hub_classifiers, name, size, resolution):
    model = hub_classifiers[name]
    assert model.num_prefix_tokens == (2 if "distilled" in name else 1)
    check_against_reference(model, photo(*size), resolution)
    check_against_reference(model, photo(*size), resolution, target=7, discard_ratio=0.5)


def test_top_classes_carry_their_names(hub_classifiers):
    rel = relevance(load_vit("mnist_vit", device="cpu"), DIGIT)
    assert rel.top(1)[0][:2] == (3, "3") and rel.target == 3
    assert abs(sum(p for *_, p in rel.top(10)) - 1) < 1e-5
    assert rel.chefer_map.shape == rel.grad_rollout_map.shape == rel.attention_map.shape == (7, 7)
    deit = hub_classifiers["deit_tiny_distilled_patch16_224"]
    names = class_names(deit)
    assert len(names) == 1000 and names[281].startswith("tabby")
    rel = relevance(deit, photo(64, 64), "tabby", resolution=64)
    assert rel.target == 281 and rel.summary()["target"]["name"].startswith("tabby")


def test_bad_targets_name_what_is_accepted():
    model = load_vit("mnist_vit", device="cpu")
    for bad in (10, -1, 2.5, "zebra", "<b>x</b>"):
        with pytest.raises(InputError, match="accepted"):
            relevance(model, DIGIT, bad)


def test_a_backbone_without_a_head_is_refused_by_type():
    backbone = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=0, depth=1)
    backbone.alias = "dino_vits16"
    with pytest.raises(NoClassifierError, match="no classifier head.*mnist_vit"):
        relevance(backbone, DIGIT)


def test_the_tolerance_is_sharp():
    """vit-explain's mirrored layer pairing (its issue #6) and Chefer's rule with the heads' mean taken
    before the clamp both miss the maps by far more than the tolerance."""
    model = load_vit("mnist_vit", device="cpu")
    x, _, _ = prepare(model, DIGIT, "auto", 16384, None)
    _, _, ch, gr, _ = relevance_rows(model, x)
    A, G, _, _ = full_attention_and_grads(model, x)
    assert deviation(gr.numpy(), grad_rollout_row(A, G.flip(0), 0.9).numpy(), 1) > 1000 * TOL
    R = torch.eye(A.shape[-1], dtype=torch.float64)
    for a, g in zip(A, G):
        R = R + (g * a).mean(0).clamp(min=0).double() @ R
    assert deviation(ch.numpy(), R[0].numpy(), 1) > 1000 * TOL


def test_threads_on_one_shared_model_each_get_their_own_maps():
    from concurrent.futures import ThreadPoolExecutor

    from attention.config import EXAMPLES_DIR

    model = load_vit("mnist_vit", device="cpu")
    digits = [str(EXAMPLES_DIR / "digits" / f"digit_{i}.png") for i in range(8)]
    alone = [relevance(model, d) for d in digits]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda d: relevance(model, d), digits))
    for a, b in zip(alone, together):
        assert a.target == b.target
        np.testing.assert_allclose(a.chefer, b.chefer, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(a.grad_rollout, b.grad_rollout, rtol=1e-5, atol=1e-7)
