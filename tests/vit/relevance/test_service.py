"""Spec of attention.vit.relevance.service, relevance for a server: one computation per (image
content, model, resolution, class), redraws served from the shared store; a class named by index or
name; no image, a model off the allow-list or without a head refused with typed errors; whether a
model is a classifier known without loading an unknown name."""

from __future__ import annotations

import shutil

import pytest

from attention.errors import InputError, ModelLoadError, NoClassifierError
from attention.vit.relevance import service
from tests.conftest import DIGIT


@pytest.fixture
def counted(monkeypatch):
    calls = []
    compute = service._compute
    monkeypatch.setattr(service, "_compute", lambda *a: calls.append(a) or compute(*a))
    monkeypatch.setattr(service, "RESULTS", type(service.RESULTS)(64 << 20, 600))  # a store of this test's own
    return calls


def test_one_computation_per_image_content_model_resolution_and_class(counted, tmp_path):
    a = service.get_relevance(DIGIT, "mnist_vit", "auto")
    assert service.get_relevance(DIGIT, " mnist_vit ", "auto") is a and len(counted) == 1
    copy = tmp_path / "same_bytes.png"
    shutil.copy(DIGIT, copy)
    assert service.get_relevance(str(copy), "mnist_vit", "auto") is a  # keyed by content, not path
    b = service.get_relevance(DIGIT, "mnist_vit", "auto", target="7")
    assert b.target == 7 and len(counted) == 2
    assert service.get_relevance(DIGIT, "mnist_vit", "auto", target=7) is b and len(counted) == 2
    assert a.target == int(a.probs.argmax())  # no class asked: the top class


def test_refusals_are_typed_and_say_what_is_accepted():
    with pytest.raises(InputError, match="No image"):
        service.get_relevance(None, "mnist_vit")
    with pytest.raises(InputError, match="accepted: an index 0 to 9"):
        service.get_relevance(DIGIT, "mnist_vit", target="12")
    with pytest.raises(ModelLoadError, match="is not offered by this server; accepted: dino_vits16"):
        service.get_relevance(DIGIT, "vit_huge_patch14_224")


def test_a_backbone_without_a_head_is_refused(monkeypatch):
    import timm

    backbone = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0, depth=1, img_size=32)
    monkeypatch.setattr(service, "load_vit", lambda name: backbone)
    monkeypatch.setattr(service, "check_allowed", lambda name: name)
    with pytest.raises(NoClassifierError):
        service.get_relevance(DIGIT, "a_backbone")


def test_is_classifier_reads_the_registry_and_loads_no_unknown_name(monkeypatch):
    monkeypatch.setattr(service, "load_vit", lambda name: pytest.fail(f"loaded {name}"))
    assert service.is_classifier("mnist_vit")
    assert not service.is_classifier("dinov2_vits14")
    assert not service.is_classifier("someone/unknown_model")
