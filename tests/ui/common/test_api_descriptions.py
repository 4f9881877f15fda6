"""The API's and MCP tools' model lists come from the registry, and one validator per parameter is shared by
every entry point (issue 31, item 8): /attention_video lists DINOv3 and deit_small as /attention_maps does,
an operator's checkpoint appears in every list, and a threshold of 0 gets the same refusal from the UI's
views, the API, the video API, the command line, the dataset extractor and the package."""

from __future__ import annotations

import gradio as gr
import numpy as np
import pytest

from attention.errors import InputError
from attention.ui.video import api as video_api
from attention.ui.vit import api as vit_api
from attention.ui.vit import relevance_panel, stepwise_api
from attention.vit.models import loader as models
from tests.conftest import DIGIT

DEFAULTS = {"resolution": "auto", "view": "heads", "threshold": 0.6, "alpha": 0.6, "cmap": "inferno"}
REFUSED = "out of range; accepted: more than 0, at most 1 (the share of each head's attention the mask keeps)"


def handlers() -> dict:
    return {
        "attention_maps": vit_api.attention_maps_fn("dino_vits16", DEFAULTS),
        "feature_maps": vit_api.feature_maps_fn("dino_vits16", DEFAULTS),
        "attention_video": video_api.attention_video_fn("dino_vits16"),
        "explain_row": stepwise_api.explain_row_fn("dino_vits16"),
        "export_view": stepwise_api.export_view_fn("dino_vits16", DEFAULTS),
    }


def model_line(doc: str) -> str:
    """The `model:` entry of a docstring's Args, continuation lines joined."""
    lines = doc.split("\n")
    i = next(i for i, ln in enumerate(lines) if ln.strip().startswith("model:"))
    out = [lines[i].strip()]
    for ln in lines[i + 1 :]:
        if ":" in ln.split()[0] if ln.split() else True:
            break
        out.append(ln.strip())
    return " ".join(out)


def test_every_endpoint_lists_every_registry_model():
    for name, fn in handlers().items():
        line = model_line(fn.__doc__)
        for alias in models.REGISTRY:
            assert alias in line, (name, alias)
    rel = model_line(relevance_panel.relevance_fn("mnist_vit").__doc__)
    for spec in models.REGISTRY.values():
        assert (spec.alias in rel) == spec.classifier, spec.alias


def test_an_operators_checkpoint_is_listed(monkeypatch):
    spec = models.ModelSpec("ckpt:epoch9", "vit_tiny_patch16_224", "your checkpoint", None, checkpoint="/x.pth")
    monkeypatch.setitem(models.REGISTRY, spec.alias, spec)
    for fn in handlers().values():
        assert "ckpt:epoch9" in model_line(fn.__doc__)


def refusal(call) -> str:
    with pytest.raises((InputError, gr.Error)) as e:
        call()
    return str(e.value.message if isinstance(e.value, gr.Error) else e.value)


def test_a_threshold_of_zero_gets_one_refusal_from_every_entry_point(tmp_path, capsys):
    from attention.__main__ import main
    from attention.dataset import extract, open_source
    from attention.vit.draw.views import check_style
    from attention.vit.engine.extract import threshold_masks
    from tests.vit.engine.test_extract import tiny_vit

    h = handlers()
    messages = {
        "views": refusal(lambda: check_style(0, 0.6, "inferno")),
        "package": refusal(lambda: threshold_masks(np.ones((1, 2, 2)), 0)),
        "api": refusal(lambda: h["attention_maps"](DIGIT, "mnist_vit", threshold=0)),
        "video api": refusal(lambda: h["attention_video"](DIGIT, "mnist_vit", threshold=0, progress=None)),
        "extract": refusal(
            lambda: extract(open_source(str(DIGIT)), tiny_vit(), tmp_path, model_name="t", threshold=0, workers=0)
        ),
    }
    for cmd in ("maps", "video", "extract"):  # argparse refuses it with the validator's message (exit 2)
        with pytest.raises(SystemExit) as e:
            main([cmd, str(DIGIT), "--threshold", "0", "--out", str(tmp_path)])
        assert e.value.code == 2
        messages[f"cli {cmd}"] = capsys.readouterr().err
    for where, msg in messages.items():
        assert "Threshold 0" in msg and REFUSED in msg, (where, msg)
