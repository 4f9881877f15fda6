"""The ViT tab's handlers read an event's inputs once: a patch click on the large map resolves the visitor's pass
once (one look-up in the server's store, `passes.served_pass`) and parses the query once (`query.from_fields`),
then draws the view of the clicked patch, as a head tile's click and a control's change do."""

from __future__ import annotations

import gradio as gr
import pytest

from attention.ui.vit.fields import fit, vit_pass
from attention.ui.vit.handlers import ViTHandlers
from attention.ui.vit.layout import ViTTab
from attention.ui.vit.refusals import KEYS, ROLLOUT
from attention.vit.draw.drawing import BIG_DISPLAY
from attention.vit.engine import request
from attention.vit.models import sources
from attention.vit.serve import inputs, passes
from tests.conftest import DIGIT


@pytest.fixture(scope="module")
def tab() -> ViTHandlers:
    s = sources.startup_model("mnist_vit")
    with gr.Blocks():
        t = ViTTab(s, vit_pass, fit)
    return ViTHandlers(t, s, DIGIT)


def fields(**given) -> dict:
    """The controls as the page sends them (`ViTTab.named`), mnist_vit on a digit."""
    out = dict(image=DIGIT, model="mnist_vit", resolution="auto", qrow=None, qcol=None, layer=3, view="heads")
    out |= dict(head=1, threshold=0.6, alpha=0.6, cmap="inferno", fusion="mean", discard_ratio=0.0)
    return out | dict(discard_rule="row", state=None, good=None) | given


@pytest.fixture
def counted(monkeypatch) -> dict:
    """How often the event looked its pass up and parsed a query."""
    n = {"pass": 0, "query": 0}

    def counting(fn, key):
        def wrapped(*a, **k):
            n[key] += 1
            return fn(*a, **k)

        return wrapped

    monkeypatch.setattr(passes, "served_pass", counting(passes.served_pass, "pass"))
    for module in (request, inputs):  # every reader of the query fields
        monkeypatch.setattr(module, "from_fields", counting(module.from_fields, "query"))
    return n


def test_a_patch_click_resolves_its_pass_once_and_parses_the_query_once(tab, counted):
    t = tab.t
    click = gr.SelectData(None, {"index": [10, 200], "value": None})
    sent = {k: v for k, v in fields().items() if k not in ("qrow", "qcol")} | {"clicked": [200, 10]}  # `tab.named`
    out = tab.click(click, **sent)  # the page's own pixel [x, y] wins over the event's
    assert counted == {"pass": 1, "query": 1}
    # mnist_vit: 28 px in 4 px patches (7 x 7); the large map is enlarged by the whole factor that makes it
    # BIG_DISPLAY px or more: 4 * k px a patch on screen
    k = -(-BIG_DISPLAY // 28)
    assert (out[t.qrow], out[t.qcol]) == (10 // (4 * k), 200 // (4 * k)) != (0, 0)
    assert "value" not in out[t.layer]  # the layer asked for was drawn: the slider is left as it is now
    assert "head 1" in out[t.caption]


def test_an_answer_moves_the_layer_slider_only_when_it_drew_another_layer(tab):
    """Gradio sends a change made while a job runs after that job's answer (`trigger_mode="always_last"`),
    reading the slider then: an answer that set the slider back to its own request's layer would undo the change."""
    t = tab.t
    out = tab.update(**fields(layer=2.0))  # the slider's number, as the page sends it
    assert "value" not in out[t.layer] and out[t.layer]["maximum"] == 3 and "layer 2" in out[t.caption]
    out = tab.update(**fields(layer=-1))  # the last layer, as a link may ask: the slider shows its number
    assert out[t.layer]["value"] == 3 and "layer 3" in out[t.caption]


def test_a_head_tile_click_and_a_change_read_their_pass_once_too(tab, counted):
    t = tab.t
    out = tab.pick_head(gr.SelectData(None, {"index": 2, "value": None}), **fields(qrow=3, qcol=4))
    assert counted == {"pass": 1, "query": 1} and out[t.head] == 2 and (out[t.qrow], out[t.qcol]) == (3, 4)
    tab.update(**fields(qrow=3, qcol=4, view="mean"))
    assert counted == {"pass": 2, "query": 2}


def test_a_refused_field_is_named_and_the_page_kept(tab, counted):
    out = tab.update(**fields(threshold=0))
    assert "Threshold 0 is out of range" in out[tab.t.note]["value"]
    assert counted["pass"] == 0  # refused at the edge, before any look-up


def test_the_tab_sends_the_controls_by_name(tab):
    assert list(tab.t.named()) == [*KEYS, *ROLLOUT, "state", "good"]
    assert list(tab.t.named("qrow", "qcol", clicked=None)) == [*(k for k in KEYS if k[0] != "q"), *ROLLOUT] + [
        "state",
        "good",
        "clicked",
    ]
