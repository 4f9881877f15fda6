"""Classifiers: which models have a classifier head that relevance explains (`classifiers`, `check_classifier`),
and the class names of its outputs, read per library through the backbone's description (`Backbone.labels`:
transformers' config.id2label/num_labels, timm's pretrained_cfg label names or ImageNet's, torchvision's
weights meta, a registered class's own), digits for mnist_vit.

names = class_names(model)     # ["tench, Tinca tinca", "goldfish, Carassius auratus", ...]
index = class_index("tabby", names)
"""

from __future__ import annotations

import torch

from attention.errors import InputError, NoClassifierError, as_whole
from attention.vit.backbone import describe
from attention.vit.models.registry import REGISTRY

SHIPPED = {"mnist_vit": tuple(str(d) for d in range(10))}  # shipped classifiers: their classes by alias


def class_names(model: torch.nn.Module) -> tuple[str, ...]:
    """One name per output of `model`'s classifier head (C,), as its library records them
    (`Backbone.labels`; the shipped model's digits); () for a model without a classifier head."""
    bb = describe(model)
    if not bb.classifier:
        return ()
    names = bb.labels()
    own = SHIPPED.get(getattr(model, "alias", ""))
    return own if own is not None and len(own) == len(names) else names


def short_name(name: str) -> str:
    """The first name of a description ("tabby, tabby cat" -> "tabby")."""
    return name.split(",")[0].strip()


def class_index(target: int | str, names: tuple[str, ...]) -> int:
    """The output index `target` means: a whole number 0..C-1 (3, "3", 3.0) or a class name, matched
    case-insensitively to a whole description or one of its comma-separated names. Raises InputError
    naming what is accepted."""
    n = len(names)
    if n == 0:
        raise NoClassifierError(f"Class {str(target)[:80]!r}: this model has no classes (no classifier head).")
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
