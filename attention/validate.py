"""One validator per parameter a visitor sets, shared by every entry point (the UI, the API, the video
API, the command line, the package): each reads any spelling (numbers, numeric text) once and says what
is wrong and what is accepted in the same words wherever it is called.

    OPACITY.check("0.5") == 0.5; OPACITY.check(2)         # InputError: 0 to 1
    Bound("Threshold", 0.6, 0, 1, lo_open=True).accepted  # "more than 0, at most 1"
    check_seconds(None) is None; check_seconds(2.5) == 2.5
    layer_index(-1, 12) == 11; layer_index(12, 12)      # InputError: 0 to 11 (or -12 to -1)

The view's parameters are declared in `attention.vit.engine.request` (their defaults and bounds, once);
the opacity is declared here because the renderer, below the request, checks it too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attention.errors import InputError, as_whole


def _number(value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan
    return v


def _shown(value, v: float) -> str:
    """The value as a message shows it: a number as a number (0, 0.0 and "0" alike: 0), else as typed."""
    return f"{v:g}" if v == v else repr(value)


@dataclass(frozen=True)
class Bound:
    """A number a caller sets: its name (as messages say it), default, range, a slider's step, and what it
    means. `lo_open` / `hi_open`: that end is not accepted. `check` reads any spelling once."""

    name: str
    default: float
    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False
    step: float = 0.05
    meaning: str = ""

    @property
    def accepted(self) -> str:
        """The accepted range in words: "0 to 1", "more than 0, at most 1", "0 up to, not including, 1"."""
        lo, hi = f"{self.lo:g}", f"{self.hi:g}"
        if self.lo_open:
            return f"more than {lo}, {'less than' if self.hi_open else 'at most'} {hi}"
        return f"{lo} up to, not including, {hi}" if self.hi_open else f"{lo} to {hi}"

    def holds(self, v: float) -> bool:
        """Whether number `v` is in the range (NaN is not)."""
        above = self.lo < v if self.lo_open else self.lo <= v
        below = v < self.hi if self.hi_open else v <= self.hi
        return above and below

    def check(self, value) -> float:
        """`value` (a number or numeric text) as a float in the range; InputError naming it and the range."""
        v = _number(value)
        if not self.holds(v):
            why = f" ({self.meaning})" if self.meaning else ""
            raise InputError(f"{self.name} {_shown(value, v)} is out of range; accepted: {self.accepted}{why}.")
        return v

    def slider(self) -> tuple[float, float, float]:
        """(minimum, maximum, step) of a slider over the range: an open end is one step inside it."""
        lo = self.lo + self.step if self.lo_open else self.lo
        hi = self.hi - self.step if self.hi_open else self.hi
        return round(lo, 6), round(hi, 6), self.step

    def on_slider(self, v: float | None) -> float | None:
        """Checked value `v` as the slider over the range can hold it (an open end's neighbourhood: the
        slider's end); None stays None."""
        lo, hi, _ = self.slider()
        return None if v is None else min(max(v, lo), hi)


OPACITY = Bound("Opacity", 0.6, 0.0, 1.0, meaning="0: the image only, 1: the map only")
"""The opacity of a map over its image (the renderer checks it; `request` reads it from here)."""


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


def head_index(head, n: int, *, from_end: bool = False) -> int:
    """A head index of a model with n heads, in 0..n-1 (`from_end`: negative counts from the end too).
    InputError otherwise: one message wherever a head is read (the tab's scores, the step by step, videos)."""
    v = as_whole(head)
    if v is None:
        raise InputError(f"Head {head!r} is not a whole number; accepted: 0 to {n - 1}.")
    if not (-n if from_end else 0) <= v < n:
        raise InputError(f"Head {v} is out of range; this model has {n} heads: 0 to {n - 1}.")
    return v % n


def check_choice(value, choices: dict[str, str], what: str) -> str:
    """The key of `choices` (key -> label) that `value` names, by its key or its label, any case; InputError
    naming `what` and the accepted keys otherwise. check_choice("Mean of heads", VIEWS, "view") == "mean"."""
    v = (value or "").strip().lower()
    for key, label in choices.items():
        if v in (key, label.lower()):
            return key
    raise InputError(f"Unknown {what} {value!r}; accepted: {', '.join(choices)}.")
