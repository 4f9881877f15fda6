"""Typed errors of the `attention` package.

Every error a user can cause derives from `AttentionError`, so a caller (the Gradio
app, the command line, a notebook) can catch one type and show its message, which
always names what was wrong and what is accepted.
"""

from __future__ import annotations


class AttentionError(Exception):
    """Base class: a problem with the caller's input or environment, with a readable message."""


class InputError(AttentionError, ValueError):
    """An argument is malformed or out of range (the message says what is accepted)."""


class ImageError(InputError):
    """An image cannot be decoded, or is too small or too large to process."""


class ModelLoadError(AttentionError, RuntimeError):
    """Model weights cannot be had: unknown name, offline and not cached, or a hub error."""


def check_int(value, name: str, lo: int, hi: int) -> int:
    """`value` as an int in [lo, hi] (whole floats such as 3.0 accepted), else InputError naming
    `name` and the accepted range: the one whole-number check of the package's inputs."""
    try:
        v = int(value)
        if v != float(value):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{name} must be a whole number from {lo} to {hi}, got {value!r}") from None
    if not lo <= v <= hi:
        raise InputError(f"{name} = {v} is out of range: expected {lo} to {hi}")
    return v
