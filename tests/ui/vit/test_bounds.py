"""The limits of the view's parameters agree everywhere, each asked for its own: the tab's sliders and the video
tab's, "Find in image"'s option boxes, permalinks, the engine's checks, the command line and the API's parameter
docs all accept what the request (`attention.vit.engine.request`) accepts and refuse what it refuses, and start
at its defaults. (Before it: a link refused a threshold of 0.01 that the API drew, and a discard ratio of 0.99
that the engine computed.)"""

from __future__ import annotations

import inspect

import gradio as gr
import numpy as np
import pytest

from attention.cli.parser import build_parser
from attention.errors import InputError
from attention.ui.video import tab as video_tab
from attention.ui.vit import api as vit_api
from attention.ui.vit.fields import fit, vit_pass
from attention.ui.vit.layout import ViTTab
from attention.vit.engine import request
from attention.vit.engine.extract import threshold_masks
from attention.vit.engine.request import DISCARD_RATIO, OPACITY, THRESHOLD
from attention.vit.models import sources
from attention.vit.serve import permalink

# each bound's edges: inside, and just outside (an open end: the end itself)
EDGES = {
    THRESHOLD: ([0.01, 1.0], [0.0, 1.01]),
    OPACITY: ([0.0, 1.0], [-0.01, 1.01]),
    DISCARD_RATIO: ([0.0, 0.99], [1.0, -0.01]),
}


def refuses(check, value) -> bool:
    try:
        check(value)
    except (InputError, SystemExit):
        return True
    return False


def agrees(check, bound) -> bool:
    """Whether `check` accepts the inside edges of `bound` and refuses the outside ones, as the request does."""
    inside, outside = EDGES[bound]
    return not any(refuses(check, v) for v in inside) and all(refuses(check, v) for v in outside)


def test_the_request_itself():
    for bound in EDGES:
        assert agrees(bound.check, bound)


@pytest.mark.parametrize("key, bound", [("thr", THRESHOLD), ("alpha", OPACITY), ("discard", DISCARD_RATIO)])
def test_permalinks(key, bound):
    assert agrees(lambda v: permalink.parse({key: str(v)}), bound)


def test_the_engine():
    maps = np.random.default_rng(0).random((2, 3, 3)).astype(np.float32)
    assert agrees(lambda v: threshold_masks(maps, v), THRESHOLD)
    assert agrees(lambda v: request.rollout(discard_ratio=v), DISCARD_RATIO)


def test_the_command_line(capsys):
    p = build_parser("test")
    assert agrees(lambda v: p.parse_args(["maps", "a.png", "--threshold", str(v)]), THRESHOLD)
    assert agrees(lambda v: p.parse_args(["video", "a.mp4", "--alpha", str(v)]), OPACITY)
    args = p.parse_args(["maps", "a.png"])
    assert (args.threshold, args.cmap, args.resolution, args.layer) == (0.6, "inferno", "auto", -1)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        p.parse_args(["maps", "--help"])
    assert THRESHOLD.accepted in " ".join(capsys.readouterr().out.split())  # its help says the range


def test_the_api_docs_and_defaults():
    fn = vit_api.attention_maps_fn("mnist_vit")
    for bound in (THRESHOLD, DISCARD_RATIO):
        assert bound.accepted in fn.__doc__
    d = {k: v.default for k, v in inspect.signature(fn).parameters.items()}
    assert (d["threshold"], d["view"], d["resolution"], d["discard_ratio"]) == (0.6, "heads", "auto", 0.0)
    assert (d["head_fusion"], d["discard"]) == (request.FUSION.default, request.DISCARD_RULE.default)


@pytest.fixture(scope="module")
def tab() -> ViTTab:
    with gr.Blocks():
        return ViTTab(sources.startup_model("mnist_vit"), vit_pass, fit)


def test_the_tabs_sliders(tab):
    for slider, bound in ((tab.threshold, THRESHOLD), (tab.alpha, OPACITY), (tab.discard_ratio, DISCARD_RATIO)):
        assert (slider.minimum, slider.maximum, slider.step) == bound.slider()
        assert slider.value == bound.default and bound.holds(slider.minimum) and bound.holds(slider.maximum)
    assert (tab.view.value, tab.cmap.value, tab.resolution.value) == ("heads", "inferno", "auto")
    assert (tab.fusion.value, tab.discard_rule.value) == ("mean", "row")
    for box, bound in zip((tab.find.std, tab.find.gamma, tab.find.beta), request.FIND_OPTIONS.values()):
        assert box.value == bound.default and bound.holds(box.minimum) and bound.holds(box.maximum)


def test_the_video_tabs_threshold():
    with gr.Blocks() as demo:
        video_tab.build()
    sliders = [b for b in demo.blocks.values() if isinstance(b, gr.Slider) and b.label == "Threshold"]
    assert [(s.minimum, s.maximum, s.step, s.value) for s in sliders] == [(*THRESHOLD.slider(), THRESHOLD.default)]
