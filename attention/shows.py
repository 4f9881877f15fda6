"""Results that show themselves in a notebook: `Shows`, the mixin every result type has.

A result type (AttentionMaps, Relevance, TextRelevance, RowSteps, VideoFrameMaps) lives on a low floor and
must not import the drawing above it, so the drawing registers itself here (`register`, called by
`attention.notebook.display` when `attention` is imported) and the mixin looks it up by the result's class.

    res                       # a cell's last line: Jupyter shows `_repr_html_` (the picture, captioned)
    res.show(view="masks")    # another view: a `Picture` that shows itself the same way
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_DRAWERS: dict[type, Callable[..., Any]] = {}


def register(cls: type, draw: Callable[..., Any]) -> None:
    """`draw(result, **view) -> Picture` (any object with `png` bytes or None and `html`) draws results of
    `cls` (subclasses too)."""
    _DRAWERS[cls] = draw


def drawer(obj: object) -> Callable[..., Any] | None:
    """The drawing registered for `obj`'s class or its nearest base; None when none is."""
    return next((_DRAWERS[c] for c in type(obj).__mro__ if c in _DRAWERS), None)


class Shows:
    """Rich display for a result: `_repr_html_` and `_repr_png_` (its default picture, drawn by the registered
    drawing when Jupyter asks: small, from the result's arrays, nothing computed again) and `show(**view)`."""

    def show(self, **view: Any) -> Any:
        """Another view of this result, as a picture that displays itself (`.png`, `.image`, `.html`).
        The keywords are the drawing's (`attention.notebook.display`): view, layer, head, query, ..."""
        draw = drawer(self)
        if draw is None:
            raise RuntimeError("No drawing is registered for this result: import attention.notebook.")
        return draw(self, **view)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict | None:
        """The picture and its captioned HTML drawn once (IPython then asks no `_repr_*_` for them again)."""
        draw = drawer(self)
        if draw is None:
            return None
        p = draw(self)
        return {"text/html": p.html} | ({} if p.png is None else {"image/png": p.png})

    def _repr_png_(self) -> bytes | None:
        draw = drawer(self)
        return None if draw is None else draw(self).png

    def _repr_html_(self) -> str | None:
        draw = drawer(self)
        return None if draw is None else draw(self).html
