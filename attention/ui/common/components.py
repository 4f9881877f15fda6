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
from collections.abc import Callable

import gradio as gr

from attention.config import SETTINGS
from attention.errors import AttentionError, cut, html_text, markdown_text
from attention.ui.common.fair_queue import door


def error(message: object, *, visible: bool = True) -> gr.Error:
    """A `gr.Error` showing `message` as text (`html_text`: Gradio renders a toast's message as HTML),
    without a traceback in the log, cut to `errors.MAX_ECHO` characters saying how much was cut;
    `visible=False`: no toast (the page shows the failure itself)."""
    return gr.Error(html_text(cut(message)), visible=visible, print_exception=False)


def error_note(message: object) -> str:
    """An error as a note inside a panel's Markdown or HTML ("⚠️ message", the message as text:
    `markdown_text`, the package's escape for Markdown and HTML alike, cut as `error` cuts)."""
    return f"⚠️ {markdown_text(cut(message))}"


def warning(message: object) -> None:
    """`gr.Warning` with `message` shown as text (see `error`)."""
    gr.Warning(html_text(cut(message)))


def info(message: object) -> None:
    """`gr.Info` with `message` shown as text (see `error`)."""
    gr.Info(html_text(cut(message)))


def pending_jobs(blocks: gr.Blocks) -> dict[str, set[str]]:
    """Gradio's own count of every session's jobs waiting in its queue or running: session id -> event ids.

    The one place this code reads a private attribute of Gradio (`Blocks._queue.pending_event_ids_session`,
    Gradio 6.31). Why: Gradio has no public count of one session's jobs (its queue's public bounds,
    `concurrency_limit` and `max_size`, are per event and for everyone together), and a count of our own
    (joins seen, minus handlers finished) would keep counting jobs Gradio drops without running them
    (cancelled, or their client gone), locking their visitor out for good. If Gradio renames or removes
    it, this raises RuntimeError: at start-up (`server.LaunchKwargs` calls it) and in
    tests/ui/common/test_components.py, instead of the per-visitor bound silently becoming none."""
    pending = getattr(getattr(blocks, "_queue", None), "pending_event_ids_session", None)
    if not isinstance(pending, dict):
        raise RuntimeError(
            f"gradio {gr.__version__} has no Blocks._queue.pending_event_ids_session (a dict of session id -> "
            "its pending event ids); attention.ui.common.components.pending_jobs needs another way to count a "
            "visitor's queued jobs, or ATTENTION_VISITOR_JOBS is not enforced."
        )
    return pending


def jobs_of(session: str | None) -> int:
    """Jobs of `session` waiting in Gradio's queue or running, during an event (`pending_jobs`); 0
    outside one."""
    from gradio.context import LocalContext

    blocks = LocalContext.blocks.get(None)
    if session is None or blocks is None:
        return 0
    return len(pending_jobs(blocks).get(session, ()))


QUIET = dict(api_visibility="private")  # an event's keywords: a UI event, not an API endpoint


def queue_share(validator: Callable | None = None) -> Callable:
    """A validator (Gradio runs it when a job asks to join the queue, before it waits) that refuses the job of
    a session with `SETTINGS.visitor_jobs` jobs waiting or running, of an address with ATTENTION_ADDRESS_WAITING
    (every session from it together), or when the queue holds ATTENTION_QUEUE_WAITING, so one visitor cannot
    fill the queue that every visitor waits in; then runs `validator`, if any. The refusal is a failed
    validation of the first input, naming what is counted and when to retry: the page marks it with the
    message, an API client gets it (gradio_client: ValidationError), and nothing is queued
    (`attention.ui.common.fair_queue.door`).

    Use as `event(fn, inputs, outputs, validator=queue_share())`."""
    return door(validator)


log = logging.getLogger(__name__)


def _refused(fn, e: AttentionError) -> gr.Error:
    """The visitor's message for a typed error, logged for the operator (a refusal, not a fault)."""
    log.info("%s refused: %s: %s", fn.__name__, type(e).__name__, cut(e))
    return error(e)


def user_errors(fn):
    """Show the package's typed errors as a `gr.Error` with their message (never a traceback; the
    message as text, `error`).

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
        raise error(
            "The sketch is not an image that can be read; accepted: a PNG, JPEG or WebP drawing "
            "(an ImageEditor value whose composite is an image file)."
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


def picture(value=None, **kwargs) -> gr.Image:
    """A picture the app draws (not an input): PNG, so its pixels arrive exactly as drawn."""
    return gr.Image(value, **{"format": "png", "interactive": False, **kwargs})


def image_path(*args, **kwargs) -> gr.Image:
    """A `gr.Image` input that hands the handler the uploaded file's path (see `_path_as_sent`)."""
    return _ImagePath(*args, **kwargs)


def sketchpad(*args, **kwargs) -> gr.Sketchpad:
    """A `gr.Sketchpad` that names a file it cannot read instead of failing inside Gradio."""
    return _Sketchpad(*args, **kwargs)


def kept_state() -> gr.State:
    """A `gr.State` for what a visitor keeps between events (a kept pass's key, retrained copies): dropped
    after `SETTINGS.state_ttl` seconds unused (ATTENTION_STATE_TTL), as long as the kept passes live."""
    return gr.State(None, time_to_live=SETTINGS.state_ttl)


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
        buttons=[],  # no share, download or fullscreen icons over the tiles (the download is in its panel)
        elem_id=elem_id,
        elem_classes=["vit-tiles"],
    )


def answer_outputs(picture: str = "picture") -> list:
    """An endpoint's outputs when it answers with a picture (PNG path, labelled `picture`), a file of its
    maps and a JSON summary; made where this is called (inside a hidden row)."""
    return [gr.Image(format="png", type="filepath", label=picture), gr.File(label="maps"), gr.JSON(label="info")]
