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
