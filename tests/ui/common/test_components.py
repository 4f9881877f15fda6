"""The shared UI pieces: inputs hand values as sent, importing the app writes nothing, and a visitor keeps
at most the stated jobs in the queue (read from Gradio's own count) while others are served."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest
from gradio_client import Client
from gradio_client.exceptions import ValidationError

from attention.config import SETTINGS
from attention.errors import AttentionError, InputError
from attention.ui.common import components

ROOT = Path(__file__).resolve().parents[3]


def test_inputs_are_gradios_components_that_pass_values_as_sent():
    s = components.slider(0, 7, value=3, step=1)
    assert isinstance(s, gr.Slider) and s.get_block_name() == "slider"
    assert s.preprocess(100) == 100 and s.preprocess(7.5) == 7.5  # the package's check judges it
    copy = type(s)(**{**s.constructor_args, "maximum": 3})  # what Gradio builds after a gr.update
    assert copy.preprocess(100) == 100
    n = components.number(value=1, precision=0)
    assert n.preprocess("abc") == "abc" and n.get_block_name() == "number"


def _project_stubs() -> set[Path]:
    """`.pyi` files in the project's own code (a virtual environment in the checkout, `.venv/`, has
    its packages' stubs: they are not ours)."""
    return set(ROOT.glob("*.pyi")) | {p for d in ("attention", "tests", "bench") for p in (ROOT / d).rglob("*.pyi")}


@pytest.mark.slow
@pytest.mark.subprocess
def test_importing_the_app_writes_no_stub_files():
    before = _project_stubs()
    subprocess.run([sys.executable, "-c", "import app"], cwd=ROOT, check=True, timeout=120)
    assert _project_stubs() == before == set()


@pytest.mark.slow
@pytest.mark.subprocess
def test_what_a_visitor_keeps_between_events_lives_as_long_as_the_setting_says():
    """The ViT tab's kept pass and last accepted view, the compare panel's pass and the retrieval tab's
    retrained copies are gr.States dropped after ATTENTION_STATE_TTL seconds unused, read from the settings
    (not a number of their own)."""
    show = (
        "import json, app, gradio as gr; "
        "print(json.dumps([b.time_to_live for b in app.demo.blocks.values() if isinstance(b, gr.State)]))"
    )
    env = {**os.environ, "ATTENTION_STATE_TTL": "123"}
    r = subprocess.run([sys.executable, "-c", show], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    lives = json.loads(r.stdout.strip().splitlines()[-1])
    # four keep a visitor's data: the ViT tab's pass and last accepted view (ui/vit/refusals), the compare
    # panel's pass, the retrained copies (the others hold small flags, kept while the page is open)
    assert sorted(t for t in lives if t != float("inf")) == [123.0] * 4, lives


def test_each_input_is_drawn_by_its_bases_frontend_component():
    for ours, base in (
        (components.sketchpad(), gr.Sketchpad()),
        (components.image_path(), gr.Image()),
        (components.slider(), gr.Slider()),
        (components.number(), gr.Number()),
    ):
        assert ours.get_block_name() == base.get_block_name()


def test_a_typed_error_reaches_the_visitor_as_its_message_and_the_operators_log(caplog):
    @components.user_errors
    def handler():
        raise InputError("Layer 99 is out of range; this model has 12 layers: 0 to 11 (or -12 to -1).")

    with caplog.at_level(logging.INFO, logger="attention.ui.common.components"), pytest.raises(gr.Error) as e:
        handler()
    assert e.value.message == "Layer 99 is out of range; this model has 12 layers: 0 to 11 (or -12 to -1)."
    assert [r.getMessage() for r in caplog.records] == [f"handler refused: InputError: {e.value.message}"]


MARKUP = "<img src=http://127.0.0.1:7931/track.png>"


def _messages_with_markup(tmp_path) -> list[str]:
    """The message of each builder that quotes visitor text, given markup: permalink parameters,
    model names, resolutions, matrix text and file names."""
    from attention.calculator.matrices import parse_matrix
    from attention.images import check_resolution, load_image
    from attention.vit.models import loader as models
    from attention.vit.serve import permalink

    bad_file = tmp_path / "<b onmouseover=alert(1)>x.png"
    bad_file.write_bytes(b"not an image")
    attempts = [
        lambda: permalink.parse({"example": MARKUP}),
        lambda: permalink.parse({"q": MARKUP}),
        lambda: permalink.parse({"view": MARKUP}),
        lambda: permalink.parse({"layer": MARKUP}),
        lambda: models.check_allowed(MARKUP),
        lambda: check_resolution(MARKUP, 16),
        lambda: parse_matrix(MARKUP, "Q"),
        lambda: parse_matrix(f"1 2; 3 {MARKUP}".replace(" src", "_src"), "K"),
        lambda: load_image(str(bad_file)),
    ]
    out = []
    for attempt in attempts:
        with pytest.raises(AttentionError) as e:
            attempt()
        out.append(str(e.value))
    return out


@pytest.mark.slow
def test_every_toast_shows_visitor_markup_as_text(tmp_path, monkeypatch):
    from tests.test_errors import rendered

    shown = []
    monkeypatch.setattr(gr, "Warning", shown.append)
    monkeypatch.setattr(gr, "Info", shown.append)
    for message in _messages_with_markup(tmp_path):
        assert "<" in message  # the builder quotes what was sent
        err = components.user_errors(lambda m=message: (_ for _ in ()).throw(AttentionError(m)))
        with pytest.raises(gr.Error) as e:
            err()
        for toast in (e.value.message, components.error(message).message):
            page = rendered(f"<div>{toast}</div>")
            assert page.tags == ["div"] and page.text == message
        components.warning(message)
        components.info(message)
    assert all(rendered(s).tags == [] for s in shown) and len(shown) == 2 * len(_messages_with_markup(tmp_path))


def test_the_calculators_stale_note_shows_markup_as_text():
    from attention.calculator.report import stale_html
    from tests.test_errors import rendered

    page = rendered(stale_html(f"Q: '{MARKUP}' is not a number"))
    assert "img" not in page.tags and MARKUP in page.text


def test_gradios_count_of_each_visitors_queued_jobs_is_still_where_we_read_it():
    """`pending_jobs` reads a private attribute of Gradio (no public count exists): this fails loudly the
    day Gradio moves it, as does the app's start-up, instead of the per-visitor bound becoming none."""
    with gr.Blocks() as demo:
        gr.Button("go").click(lambda: None, None, None)
    assert isinstance(components.pending_jobs(demo), dict)
    with pytest.raises(RuntimeError, match="pending_event_ids_session"):
        components.pending_jobs(SimpleNamespace(_queue=SimpleNamespace()))


@pytest.fixture
def held_jobs_app():
    """A Blocks whose event holds a job that sent "hold" until `gate` is set, behind `queue_share`;
    nothing else bounds it (no concurrency limit), so only the share can refuse a job."""
    gate, started = threading.Event(), []

    def work(x: str) -> str:
        started.append(x)
        if x == "hold":
            gate.wait(60)
        return x

    with gr.Blocks() as demo:
        box = gr.Textbox()
        box.submit(work, box, gr.Textbox(), api_name="work", concurrency_limit=None, validator=components.queue_share())
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True)
    yield url, gate, started
    gate.set()
    demo.close()


def test_a_visitor_with_the_stated_jobs_queued_is_refused_another_while_other_visitors_are_served(held_jobs_app):
    url, gate, started = held_jobs_app
    limit = SETTINGS.visitor_jobs
    a = Client(url, verbose=False)  # one visitor: one session for all its jobs
    held = [a.submit("hold", api_name="/work") for _ in range(limit)]
    deadline = time.time() + 60
    while started.count("hold") < limit and time.time() < deadline:
        time.sleep(0.05)
    assert started.count("hold") == limit  # all running at once: nothing but the share limits them
    with pytest.raises(ValidationError, match=f"this session has {limit} requests waiting or running; each session"):
        a.submit("hold", api_name="/work").result(timeout=60)
    assert started.count("hold") == limit  # the refused job never ran
    assert Client(url, verbose=False).predict("now", api_name="/work") == "now"  # another visitor is served
    gate.set()
    assert [j.result(timeout=60) for j in held] == ["hold"] * limit
    deadline = time.time() + 10  # Gradio counts a job done just after its answer is sent
    while time.time() < deadline:
        try:
            assert a.predict("after", api_name="/work") == "after"  # the visitor's share is free again
            break
        except ValidationError:
            time.sleep(0.1)
    assert started[-1] == "after"
