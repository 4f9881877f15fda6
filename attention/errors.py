"""Typed errors of the `attention` package.

Every error a user can cause derives from `AttentionError`, so a caller (the Gradio
app, the command line, a notebook) can catch one type and show its message, which
always names what was wrong and what is accepted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def html_text(text: object) -> str:
    """`text` as HTML element content that shows exactly the characters given: `&` and `<` become
    entities, so markup inside (a URL parameter, a file or model name, matrix text a visitor typed)
    never becomes an element, a request or a form. The one escape for every message a page renders
    as HTML (Gradio's toasts from gr.Error / gr.Warning / gr.Info, gr.HTML). `>` and quotes are left
    as typed (no tag can open without `<`; never used inside an attribute), so API callers, who get
    the same message, read `>=` and `'nine'` unchanged."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;")


_MARKDOWN = str.maketrans({c: f"&#{ord(c)};" for c in "&<>\\`*_{}[]()#+-.!|~:/@$"} | {"\n": " ", "\r": " ", "\t": " "})


def markdown_text(text: object) -> str:
    """`text` as Markdown (or HTML) that shows exactly the characters given: every character Markdown or HTML
    could read as syntax (`[`, `]`, `(`, `!`, `*`, `_`, backticks, `<`, `&`, `:`, `/`, `.`, `@`, ...) becomes a
    numeric character reference, which Markdown shows as that character and never parses (no link, image,
    emphasis, code, autolinked URL or address, HTML element), line breaks become spaces (no new block), and
    leading spaces references too (no indented code block). `html_text`'s twin for every place a page renders
    visitor text as Markdown: gr.Markdown, notes inside Markdown components, also inside an HTML block there
    (the references read the same in HTML)."""
    s = str(text).translate(_MARKDOWN)
    body = s.lstrip(" ")
    return "&#32;" * (len(s) - len(body)) + body


MAX_ECHO = 1000  # characters of a message that may reach an answer or the log (what a visitor sent, cut)


def cut(text: object, limit: int = MAX_ECHO) -> str:
    """`text` as a str of at most about `limit` characters: longer, its start and how much was cut, so that
    nothing a visitor sends comes back whole in an answer or a log line."""
    s = str(text)
    if len(s) <= limit:
        return s
    return f"{s[:limit]}… ({len(s) - limit:,} more characters cut)"


class AttentionError(Exception):
    """Base class: a problem with the caller's input or environment, with a readable message."""


class InputError(AttentionError, ValueError):
    """An argument is malformed or out of range (the message says what is accepted)."""


class FieldError(InputError):
    """An InputError that names the inputs at fault in `fields`, as a form names them: matrices ("Q",
    "K", "V", "X", "W_q", "W_k", "W_v", "W_o") or the calculator's settings ("heads", "scale", "mask",
    "dropout", "seed"), so a form can outline exactly those."""

    def __init__(self, message: str, fields: tuple[str, ...]):
        super().__init__(message)
        self.fields = fields


@contextmanager
def blame(*fields: str) -> Iterator[None]:
    """Re-raise an InputError raised inside as a FieldError naming `fields` (same message);
    a FieldError passes unchanged."""
    try:
        yield
    except FieldError:
        raise
    except InputError as e:
        raise FieldError(str(e), fields) from None


class ImageError(InputError):
    """An image cannot be decoded, or is too small or too large to process."""


class VideoError(InputError):
    """A video cannot be decoded, holds no frames, or its stream is corrupt (the message says what is accepted)."""


class UnsupportedModelError(InputError):
    """A model whose attention the engine cannot read exactly (the message names the block class and why)."""


class NoClassifierError(InputError):
    """The model has no classifier head (a feature backbone such as DINO's): there is no class to explain
    (the message names models that have one)."""


class NoTextTowerError(InputError):
    """The model has no text tower (an image-only ViT): there is no prompt to match (the message names models
    that have one)."""


class ModelLoadError(AttentionError, RuntimeError):
    """Model weights cannot be had: unknown name, offline and not cached, or a hub error."""


class CheckpointError(ModelLoadError):
    """A checkpoint file of one's own cannot be used: unreadable, unsafe to unpickle, or not fitting its
    architecture (the message names the file, the tensor and both shapes where it applies)."""


def without_unsafe_advice(message: str) -> str:
    """A library's error message without torch's advice to load a file with `weights_only=False` (which
    would run any code the file holds): the lines that do not give it, joined ("" when none is left).
    Every message quoting torch.load's error goes through here (checkpoints, the hub's weights files)."""
    import re

    keep = [
        line.strip().removeprefix("WeightsUnpickler error:").strip()
        for line in str(message).split("\n")
        if line.strip() and not re.search(r"weights_only|torch\.load|pytorch\.org|trusted source", line)
    ]
    return "; ".join(keep)


def as_whole(value) -> int | None:
    """`value` as an int when it is a whole number (3, 3.0, "3", a numpy integer), else None
    (2.5, NaN, inf, "abc", None): the one whole-number test behind every index and count check."""
    try:
        f = float(value)
        v = int(f)
    except (TypeError, ValueError, OverflowError):
        return None
    return v if v == f else None


def check_int(value, name: str, lo: int, hi: int) -> int:
    """`value` as an int in [lo, hi] (whole floats such as 3.0 accepted), else InputError naming
    `name` and the accepted range."""
    v = as_whole(value)
    if v is None:
        raise InputError(f"{name} must be a whole number from {lo} to {hi}, got {value!r}")
    if not lo <= v <= hi:
        raise InputError(f"{name} = {v} is out of range: expected {lo} to {hi}")
    return v


def check_number(value, name: str, lo: float, hi: float, *, below_hi: bool = False) -> float:
    """`value` as a finite float in [lo, hi] (or [lo, hi) with below_hi), else InputError naming
    `name` and the accepted range. Accepts numbers and numeric strings ("0.5")."""
    top = f"below {hi:g}" if below_hi else f"{hi:g}"
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        v = float("nan")
    if v != v:  # NaN, or not a number at all
        raise InputError(f"{name} must be a number from {lo:g} to {top}, got {value!r}")
    if not (lo <= v < hi if below_hi else lo <= v <= hi):
        raise InputError(f"{name} = {v:g} is out of range: expected {lo:g} to {top}")
    return v


class BudgetError(InputError):
    """A request would cost more compute or memory than this server allows (the message names
    the largest setting that fits)."""
