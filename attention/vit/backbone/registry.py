"""The registry of backbone descriptions: which library (or which user's class) describes a model, tried in
order, the users' own first. It only describes: an entry says which models it matches and how to describe one
(`Backbone`); nothing is built or loaded here (as timm's `_registry.py` names models and their configs).

    register_backbone(MyViT, Layout(blocks="layers", attention="mixer", final="ln", prefix=("cls",)))
    register_backbone(lambda m: hasattr(m, "my_blocks"), my_describe, name="my_vit")   # a function of one's own
    entry_of(model)             # the first entry that matches `model`, or None

The built-in libraries (timm, transformers, open_clip, torchvision, Meta's classes) are entries like any
user's, registered by `backbone/__init__.py`, after which users' entries come first (the latest first).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch

from attention.errors import InputError
from attention.vit.backbone.spec import Backbone


@dataclass(frozen=True)
class Library:
    """One registry entry: `name` (what `library_of` answers), `family` (a line of the refusal's list of
    described families), `matches(model)` and `describe(model) -> Backbone`."""

    name: str
    family: str
    matches: Callable[[torch.nn.Module], bool]
    describe: Callable[[torch.nn.Module], Backbone]
    builtin: bool = False


_USERS: list[Library] = []  # the latest first
_BUILTIN: list[Library] = []
_LOCK = threading.Lock()


def _matcher(match) -> tuple[Callable[[torch.nn.Module], bool], str]:
    """(a predicate, a name) from a class (its instances, subclasses too) or a predicate."""
    if isinstance(match, type):
        if not issubclass(match, torch.nn.Module):
            raise InputError(f"register_backbone: {match.__name__} is not a torch.nn.Module class.")
        return (lambda m: isinstance(m, match)), f"{match.__module__}.{match.__qualname__}"
    if callable(match):
        return match, getattr(match, "__name__", "predicate")
    raise InputError(
        f"register_backbone: {type(match).__name__} is not accepted as what to match; accepted: a torch.nn.Module "
        "class or a function model -> bool."
    )


def register_backbone(match, how, *, name: str | None = None, family: str | None = None) -> Library:
    """Describe a model class the package does not know, without editing it.

    match: a torch.nn.Module class (its instances and subclasses) or a predicate `model -> bool`.
    how: a `Layout` (where the class keeps its blocks, attention modules, final norm, prefix tokens, patch
    size...) or a function `model -> Backbone` of one's own.
    name: the entry's name (`library_of` answers it; `unregister_backbone(name)` removes it); default the
    class's qualified name. family: its line in the described families (default the name).
    Entries registered later are tried first, and every user's entry before the built-in libraries'.
    Returns the entry. Thread-safe."""
    pred, default = _matcher(match)
    describe = how.describe if hasattr(how, "describe") and not isinstance(how, type) else how
    if not callable(describe):
        raise InputError(
            f"register_backbone: {type(how).__name__} is not accepted as how to describe; accepted: a Layout or a "
            "function model -> Backbone."
        )
    name = (name or default).strip()
    entry = Library(name, family or name, pred, describe)
    with _LOCK:
        _USERS[:] = [entry, *(e for e in _USERS if e.name != name)]
    return entry


def unregister_backbone(name: str) -> bool:
    """Remove the user's entry `name`; whether there was one (built-in entries stay)."""
    with _LOCK:
        kept = [e for e in _USERS if e.name != name]
        found = len(kept) != len(_USERS)
        _USERS[:] = kept
    return found


def add_builtin(entry: Library) -> None:
    """A built-in library's entry, tried after every user's, in the order added (`backbone/__init__.py`)."""
    _BUILTIN.append(Library(entry.name, entry.family, entry.matches, entry.describe, builtin=True))


def entries() -> tuple[Library, ...]:
    """Every entry in the order they are tried: users' (latest first), then the built-in libraries'."""
    with _LOCK:
        return (*_USERS, *_BUILTIN)


def entry_of(model: torch.nn.Module) -> Library | None:
    """The first entry matching `model`, or None."""
    return next((e for e in entries() if e.matches(model)), None)


def families() -> tuple[str, ...]:
    """The described families, one line per entry (users' first), for refusals and docs."""
    seen: dict[str, None] = {}
    for e in entries():
        seen.setdefault(e.family, None)
    return tuple(seen)
