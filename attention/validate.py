"""One validator per parameter a visitor sets, shared by every entry point (the UI, the API, the video
API, the command line, the package): each reads any spelling (numbers, numeric text) once and says what
is wrong and what is accepted in the same words wherever it is called.

    check_threshold(0.6) == 0.6; check_threshold(0)       # InputError: more than 0, at most 1
    check_opacity("0.5") == 0.5
    check_seconds(None) is None; check_seconds(2.5) == 2.5
    layer_index(-1, 12) == 11; layer_index(12, 12)      # InputError: 0 to 11 (or -12 to -1)
"""

from __future__ import annotations

import math

from attention.errors import InputError, as_whole

THRESHOLD = 0.6  # DINO's default mask threshold


def _number(value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan
    return v


def _shown(value, v: float) -> str:
    """The value as a message shows it: a number as a number (0, 0.0 and "0" alike: 0), else as typed."""
    return f"{v:g}" if v == v else repr(value)


def check_threshold(value) -> float:
    """A mask threshold: the share of each head's attention the mask keeps, in (0, 1]. InputError otherwise."""
    v = _number(value)
    if not 0 < v <= 1:  # NaN too
        raise InputError(
            f"Threshold {_shown(value, v)} is out of range; accepted: more than 0, at most 1 (the share of each head's "
            "attention the mask keeps)."
        )
    return v


def check_opacity(value) -> float:
    """The opacity of a map over its image, in [0, 1]. InputError otherwise."""
    v = _number(value)
    if not 0 <= v <= 1:
        raise InputError(f"Opacity {_shown(value, v)} is out of range; accepted: 0 (image only) to 1 (map only).")
    return v


def check_seconds(value) -> float | None:
    """A length in seconds (only the first this many of a video): None for all of it, else more than 0."""
    if value is None:
        return None
    v = _number(value)
    if not 0 < v <= 1e7:
        raise InputError(
            f"Length {_shown(value, v)} s is out of range; accepted: more than 0 seconds, or none for all."
        )
    return v


def layer_index(layer, n: int) -> int:
    """A layer index of a model with n layers, in 0..n-1 (negative counts from the end). InputError otherwise."""
    v = as_whole(layer)
    if v is None:
        raise InputError(f"Layer {layer!r} is not a whole number; accepted: 0 to {n - 1}, or -1 for the last.")
    if not -n <= v < n:
        raise InputError(f"Layer {v} is out of range; this model has {n} layers: 0 to {n - 1} (or -{n} to -1).")
    return v % n


def check_choice(value, choices: dict[str, str], what: str) -> str:
    """The key of `choices` (key -> label) that `value` names, by its key or its label, any case; InputError
    naming `what` and the accepted keys otherwise. check_choice("Mean of heads", VIEWS, "view") == "mean"."""
    v = (value or "").strip().lower()
    for key, label in choices.items():
        if v in (key, label.lower()):
            return key
    raise InputError(f"Unknown {what} {value!r}; accepted: {', '.join(choices)}.")
