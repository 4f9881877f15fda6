"""Class relevance on transformers classifiers (issue 47): ViTForImageClassification, DeiTForImageClassification
and Dinov2ForImageClassification, tiny random configs with named labels (config.id2label), explained with no
target, an index and a label name. The target, the ranking of `top()` and its names are transformers' own (its
logits, its id2label); the maps equal Chefer et al.'s rule and grad-rollout written with full matrices from
transformers' own eager attention and autograd (tests/vit/relevance_reference.py); wrong targets and headless
models are refused with typed errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from attention.errors import InputError, NoClassifierError
from attention.vit.engine.preprocess import prepare
from attention.vit.relevance import class_names, relevance
from tests.vit.backbone_oracle import hf_tiny
from tests.vit.relevance.test_compute import deviation
from tests.vit.relevance_reference import chefer_row, grad_rollout_row, hf_attention_and_grads

pytest.importorskip("transformers")

LABELS = ("tench, Tinca tinca", "goldfish", "tabby, tabby cat", "zebra", "toilet tissue")
CLASSIFIERS = {  # class: (its config's size, the resolution fed: a 4 x 4 grid)
    "ViTForImageClassification": (dict(image_size=32, patch_size=16), 64),
    "DeiTForImageClassification": (dict(image_size=32, patch_size=16), 64),
    "Dinov2ForImageClassification": (dict(image_size=28, patch_size=14), 56),
}
TOL = 1e-5  # of the map's peak


def classifier(cls: str) -> torch.nn.Module:
    model = hf_tiny(cls, 0, id2label=dict(enumerate(LABELS)), **CLASSIFIERS[cls][0])
    with torch.no_grad():
        model.classifier.weight.mul_(20.0)  # a confident head: gradients far from zero
    return model


@pytest.fixture(scope="module")
def image() -> Image.Image:
    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 256, (70, 90, 3), dtype=np.uint8))


@pytest.mark.parametrize("target", [None, 3, "tabby"])
@pytest.mark.parametrize("cls", list(CLASSIFIERS))
def test_relevance_is_chefers_rule_on_transformers_own_attention(cls, target, image):
    model = classifier(cls)
    res = CLASSIFIERS[cls][1]
    rel = relevance(model, image, target, resolution=res)
    x, _, _ = prepare(model, image, res, 16384, None)
    want = {None: None, 3: 3, "tabby": 2}[target]
    A, G, logits, t = hf_attention_and_grads(model, x, want)
    assert rel.target == t and rel.names == LABELS
    order = torch.argsort(-logits, stable=True).tolist()
    assert [i for i, _, _ in rel.top(5)] == order  # the ranking of transformers' own logits
    assert [n for _, n, _ in rel.top(5)] == [LABELS[i] for i in order]
    assert np.allclose(rel.probs, torch.softmax(logits, -1).numpy(), atol=1e-5)
    P = rel.num_prefix_tokens
    assert deviation(rel.chefer, chefer_row(A, G).numpy(), P) < TOL
    assert deviation(rel.grad_rollout, grad_rollout_row(A, G, rel.discard_ratio).numpy(), P) < TOL
    assert np.abs(rel.attention - A[:, :, 0].numpy()).max() < TOL * float(A[:, :, 0].max())
    assert rel.summary()["target"]["name"] == LABELS[t]


def test_class_names_are_the_configs_labels_and_bad_targets_are_refused_by_type(image):
    model = classifier("ViTForImageClassification")
    assert class_names(model) == LABELS
    for bad in (5, -1, "unicorn", 2.5):
        with pytest.raises(InputError, match=r"accepted: an index 0 to 4"):
            relevance(model, image, bad, resolution=64)


def test_a_config_without_names_numbers_its_labels_as_transformers_does():
    model = hf_tiny("DeiTForImageClassification", 0, num_labels=3, image_size=32, patch_size=16)
    assert class_names(model) == ("LABEL_0", "LABEL_1", "LABEL_2")


def test_a_transformers_encoder_without_a_head_is_no_classifier(image):
    model = hf_tiny("ViTModel", 0, image_size=32, patch_size=16)
    assert class_names(model) == ()
    with pytest.raises(NoClassifierError):
        relevance(model, image, "tabby", resolution=64)
