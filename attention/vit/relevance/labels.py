"""Classifiers: which models have a classifier head that relevance explains (`classifiers`, `check_classifier`),
and the class names of its outputs: ImageNet names from timm's own label data, digits for mnist_vit.

names = class_names(model)     # ["tench, Tinca tinca", "goldfish, Carassius auratus", ...]
index = class_index("tabby", names)
"""

from __future__ import annotations

from functools import lru_cache

import torch

from attention.errors import InputError, NoClassifierError, as_whole
from attention.vit.backbone import describe
from attention.vit.models.registry import REGISTRY

SHIPPED = {"mnist_vit": tuple(str(d) for d in range(10))}  # shipped classifiers: their classes by alias


@lru_cache(maxsize=8)
def _imagenet(subset: str) -> tuple[str, ...]:
    from timm.data import ImageNetInfo

    info = ImageNetInfo(subset)
    return tuple(info.index_to_description(i) for i in range(info.num_classes()))


def class_names(model: torch.nn.Module) -> tuple[str, ...]:
    """One name per output of `model`'s head: the shipped model's own, else timm's ImageNet names when
    the head's size is an ImageNet subset's (`timm.data.infer_imagenet_subset`), else "class 0", ..."""
    n = int(getattr(model, "num_classes", 0) or 0)
    own = SHIPPED.get(getattr(model, "alias", ""))
    if own is not None and len(own) == n:
        return own
    from timm.data import infer_imagenet_subset

    subset = infer_imagenet_subset(model)
    if subset is not None:
        names = _imagenet(subset)
        if len(names) == n:
            return names
    return tuple(f"class {i}" for i in range(n))


def short_name(name: str) -> str:
    """The first name of a description ("tabby, tabby cat" -> "tabby")."""
    return name.split(",")[0].strip()


def class_index(target: int | str, names: tuple[str, ...]) -> int:
    """The output index `target` means: a whole number 0..C-1 (3, "3", 3.0) or a class name, matched
    case-insensitively to a whole description or one of its comma-separated names. Raises InputError
    naming what is accepted."""
    n = len(names)
    if not isinstance(target, str) or target.strip().lstrip("-").isdigit():
        i = as_whole(target)
        if i is None or not 0 <= i < n:
            raise InputError(f"Class {target!r} is not accepted; accepted: an index 0 to {n - 1} or a class name.")
        return i
    want = target.strip().lower()
    for i, name in enumerate(names):
        if want == name.lower() or want in (p.strip().lower() for p in name.split(",")):
            return i
    raise InputError(
        f"Class {target[:80]!r} is not one of this model's {n} classes; accepted: an index 0 to {n - 1} "
        f"or a name such as {short_name(names[0])!r}."
    )


def classifiers() -> list[str]:
    """The registry's models with a classifier head."""
    return [s.alias for s in REGISTRY.values() if s.classifier]


def check_classifier(model: torch.nn.Module) -> None:
    """Raises NoClassifierError when `model` has no classifier head, InputError when its head does not
    read the class token (relevance is the class token's row)."""
    name = getattr(model, "alias", type(model).__name__)
    bb = describe(model)
    if not bb.classifier:
        raise NoClassifierError(
            f"{name} has no classifier head (a feature backbone), so there is no class to explain; "
            f"pick a classifier: {', '.join(classifiers())}."
        )
    pool = bb.extra.get("readout", "token")
    if pool != "token" or "cls" not in bb.prefix:
        raise InputError(
            f"{name} pools its tokens by {pool!r}, not through a class token; relevance explains the class "
            f"token's decision: pick a model that classifies from it, such as {', '.join(classifiers())}."
        )
