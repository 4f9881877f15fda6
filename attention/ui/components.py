"""Gradio pieces every tab shares: typed errors shown as messages, and inputs that hand the
handler the value as sent so the package's checks (not Gradio's conversions) judge it.

Inputs are subclasses of Gradio's components that differ only in `preprocess`. They are made with
`ABCMeta.__new__` rather than a `class` statement: Gradio's component metaclass would otherwise write a
`.pyi` stub beside this file on import. They keep their base's name, so the frontend draws its own
component, and they are real classes, so the copy Gradio builds per session after a `gr.update`
(`block.__class__(**kwargs)`) keeps the behaviour (a patched instance would lose it).
"""

from __future__ import annotations

import functools
import inspect
import logging
from abc import ABCMeta

import gradio as gr

from attention.errors import AttentionError

log = logging.getLogger(__name__)


def _refused(fn, e: AttentionError) -> gr.Error:
    """The visitor's message for a typed error, logged for the operator (a refusal, not a fault)."""
    log.info("%s refused: %s: %s", fn.__name__, type(e).__name__, e)
    return gr.Error(str(e), print_exception=False)


def user_errors(fn):
    """Show the package's typed errors as a `gr.Error` with their message (never a traceback).

    Works for plain handlers and for generator handlers (streamed outputs)."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except AttentionError as e:
                raise _refused(fn, e) from None

        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AttentionError as e:
            raise _refused(fn, e) from None

    return wrapper


def _as_sent(self, payload):
    """The value exactly as sent (no rounding, no bounds left by the last answer): Gradio's own
    conversion would fail first with its generic error, or round 7.5 to 8."""
    return payload


def _path_as_sent(self, payload):
    """An uploaded file's path, unopened, so `attention.images.load_image` judges every file and its
    message reaches the visitor or API client (Gradio's own decoding would swallow it)."""
    if payload is not None and payload.path and not (payload.url or "").startswith("data:"):
        return str(payload.path)
    return gr.Image.preprocess(self, payload)


def _guarded_sketch(self, payload):
    try:
        return gr.Sketchpad.preprocess(self, payload)
    except Exception:  # noqa: BLE001 - any decoding failure is the sender's file
        raise gr.Error(
            "The sketch is not an image that can be read; accepted: a PNG, JPEG or WebP drawing "
            "(an ImageEditor value whose composite is an image file).",
            print_exception=False,
        ) from None


def _variant(base: type, preprocess) -> type:
    """`base` with another `preprocess`, without running Gradio's metaclass body (see module doc).
    Its frontend component is the base's (a template such as Sketchpad draws as its own parent)."""
    block_name = (base.__base__ if getattr(base, "is_template", False) else base).__name__.lower()
    attrs = {"preprocess": preprocess, "get_block_name": lambda self: block_name, "__module__": __name__}
    return ABCMeta.__new__(type(base), base.__name__, (base,), {**attrs, "__doc__": preprocess.__doc__})


_Number = _variant(gr.Number, _as_sent)
_Slider = _variant(gr.Slider, _as_sent)
_ImagePath = _variant(gr.Image, _path_as_sent)
_Sketchpad = _variant(gr.Sketchpad, _guarded_sketch)


def number(*args, **kwargs) -> gr.Number:
    """A `gr.Number` whose value reaches the handler as sent."""
    return _Number(*args, **kwargs)


def slider(*args, **kwargs) -> gr.Slider:
    """A `gr.Slider` whose value reaches the handler as sent (API callers may send any number)."""
    return _Slider(*args, **kwargs)


def image_path(*args, **kwargs) -> gr.Image:
    """A `gr.Image` input that hands the handler the uploaded file's path (see `_path_as_sent`)."""
    return _ImagePath(*args, **kwargs)


def sketchpad(*args, **kwargs) -> gr.Sketchpad:
    """A `gr.Sketchpad` that names a file it cannot read instead of failing inside Gradio."""
    return _Sketchpad(*args, **kwargs)


def tiles_gallery(label: str, columns: int, elem_id: str) -> gr.Gallery:
    """A gallery of pictures to look at (not to upload to): PNG as sent, whole tiles, no lightbox."""
    return gr.Gallery(
        label=label,
        format="png",
        columns=columns,
        height="auto",
        object_fit="contain",
        interactive=False,
        allow_preview=False,
        elem_id=elem_id,
    )
