"""Spec of attention.vit.relevance.labels: a 1000-way head gets ImageNet's class names in ImageNet's
order (the well-known indices: 0 tench, 1 goldfish, 281 tabby, 999 toilet tissue), the shipped digit
model its digits, any other head "class i"; a target is an index or a name, matched as described."""

from __future__ import annotations

import pytest
import timm

from attention.errors import InputError
from attention.vit.models.loader import load_vit
from attention.vit.relevance.labels import class_index, class_names, short_name


@pytest.fixture(scope="module")
def imagenet():
    m = timm.create_model("vit_tiny_patch16_224", pretrained=False, depth=1, img_size=32, patch_size=16)
    return class_names(m)


def test_a_1000_way_head_has_imagenets_names_in_order(imagenet):
    assert len(imagenet) == 1000
    firsts = {i: short_name(imagenet[i]) for i in (0, 1, 281, 999)}
    assert firsts == {0: "tench", 1: "goldfish", 281: "tabby", 999: "toilet tissue"}


def test_the_shipped_digits_and_any_other_head():
    assert class_names(load_vit("mnist_vit")) == tuple("0123456789")
    other = timm.create_model("vit_tiny_patch16_224", pretrained=False, depth=1, img_size=32, num_classes=7)
    assert class_names(other) == tuple(f"class {i}" for i in range(7))


def test_a_target_is_an_index_or_a_name(imagenet):
    assert class_index(281, imagenet) == class_index("281", imagenet) == class_index(281.0, imagenet) == 281
    assert class_index("tabby", imagenet) == class_index("Tabby Cat", imagenet) == 281
    assert class_index(imagenet[1].upper(), imagenet) == 1  # a whole description, any case


@pytest.mark.parametrize("bad", [1000, -1, 2.5, "3.5", "unicorn", None])
def test_anything_else_is_refused_naming_what_is_accepted(imagenet, bad):
    with pytest.raises(InputError, match=r"accepted: an index 0 to 999"):
        class_index(bad, imagenet)


def test_timms_own_label_names_when_its_pretrained_cfg_has_them():
    m = timm.create_model("vit_tiny_patch16_224", pretrained=False, depth=1, img_size=32, num_classes=3)
    m.pretrained_cfg = {**m.pretrained_cfg, "label_names": ["n01", "n02", "n03"]}
    assert class_names(m) == ("n01", "n02", "n03")
    m.pretrained_cfg = {**m.pretrained_cfg, "label_names": ["n01"]}  # not one per output: not its head's
    assert class_names(m) == ("class 0", "class 1", "class 2")


def test_torchvisions_weights_meta_names_a_1000_way_head():
    from torchvision.models import VisionTransformer, ViT_B_16_Weights

    def vit(n):
        return VisionTransformer(32, 16, num_layers=1, num_heads=2, hidden_dim=8, mlp_dim=16, num_classes=n)

    assert class_names(vit(1000)) == tuple(ViT_B_16_Weights.IMAGENET1K_V1.meta["categories"])
    assert class_names(vit(1000))[:2] == ("tench", "goldfish")
    assert class_names(vit(5)) == tuple(f"class {i}" for i in range(5))


def test_a_backbone_has_no_classes_and_a_target_is_refused_by_type():
    m = timm.create_model("vit_tiny_patch16_224", pretrained=False, depth=1, img_size=32, num_classes=0)
    assert class_names(m) == ()
    with pytest.raises(InputError, match="no classes"):
        class_index("tabby", class_names(m))
