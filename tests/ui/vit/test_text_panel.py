""" "Find in image": the panel's drawing without a browser (for a model without a text tower it names the models
with one; the maps, segmentation and escaped scores for digit_clip, the rule named), /text_relevance through
gradio_client and as an MCP tool (rule and options), `python -m attention text`, and links carrying the rule."""

from __future__ import annotations

import json

import gradio as gr
import numpy as np
import pytest
from gradio_client import handle_file
from PIL import Image

from attention.__main__ import main
from attention.planted import planted
from attention.ui.vit.text_panel import TextPanel
from attention.vit.models.loader import load_vit
from attention.vit.text import text_relevance
from tests.conftest import DIGIT
from tests.ui.common.test_mcp import schema

PROMPTS = "a handwritten seven, a handwritten three"


@pytest.fixture(scope="module")
def two_digits(tmp_path_factory) -> str:
    """A held-out 56 x 84 canvas with two digits, as a PNG path."""
    img = planted(2, (2, 3), seed=5).image
    path = tmp_path_factory.mktemp("find") / "two_digits.png"
    Image.fromarray(img).save(path)
    return str(path)


def panel() -> TextPanel:
    with gr.Blocks():
        return TextPanel()


OPTS = ("", 5.0, 3.0, 1.2)
NAMES = ("img", "mdl", "res", "prompts", "rule", "residual", "std", "gamma", "beta", "chosen", "al", "cm")


def draw(p: TextPanel, *values):
    """The panel's handler, its inputs by name as the page sends them (in this order)."""
    return p.draw(**dict(zip(NAMES, values)))


def test_says_which_models_have_a_text_tower_for_one_without():
    p = panel()
    out = draw(p, DIGIT, "mnist_vit", "auto", PROMPTS, "naclip", *OPTS, 0, 0.6, "inferno")
    assert out[p.box]["visible"] and "needs a model with a text tower" in out[p.details]
    assert "`digit_clip`" in out[p.details] and out[p.gallery] is None


def test_the_note_for_a_model_without_a_text_tower_shows_its_name_as_typed():
    from markdown_it import MarkdownIt

    from attention.ui.vit.text_panel import no_text_note

    name = "open_clip:[x](http://h/a.png)_*b*`<i>`"
    html = MarkdownIt().render(no_text_note(name))
    assert "<a " not in html and "<i>" not in html and "<code>open" not in html  # no link, markup or code span
    assert "open_clip:[x](http://h/a.png)_*b*`&lt;i&gt;`" in html.replace("&amp;", "&")


def test_shown_with_a_hint_until_prompts_are_typed():
    p = panel()
    out = draw(p, DIGIT, "digit_clip", "auto", "  ", "naclip", *OPTS, 0, 0.6, "inferno")
    assert out[p.box]["visible"] and "Type what to find" in out[p.details] and out[p.gallery] is None


def test_maps_segmentation_and_escaped_scores_for_digit_clip(two_digits):
    p = panel()
    out = draw(
        p, two_digits, "digit_clip", "native", "<b>seven</b>, a handwritten three", "legrad", *OPTS, 2, 0.6, "inferno"
    )
    assert out[p.box]["visible"] and len(out[p.gallery]) == 3  # two prompts, then the segmentation
    assert out[p.chosen] == 2 and out[p.big]["label"].startswith("Segmentation (LeGrad)")
    assert all("LeGrad" in caption for _, caption in out[p.gallery])  # every map's caption names its rule
    assert "&lt;b>seven&lt;/b>" in out[p.scores] and "<b>seven" not in out[p.scores]
    assert "LeGrad" in out[p.caption]
    bad = draw(p, two_digits, "digit_clip", "native", "a, <i>" + "x" * 200, "naclip", *OPTS, 0, 0.6, "inferno")
    assert "Prompt 2 has 203 characters" in bad[p.details] and "<i>" not in bad[p.details]
    assert bad[p.gallery] is None and bad[p.big] is None and bad[p.scores] == ""  # no earlier answer left beneath
    worse = draw(p, two_digits, "digit_clip", "native", "a seven", "naclip", "", 0, 3.0, 1.2, 0, 0.6, "inferno")
    assert "std 0 is out of range" in worse[p.details]


def test_one_prompt_shows_its_own_score_never_a_share(two_digits):
    p = panel()
    out = draw(p, two_digits, "digit_clip", "native", "a handwritten seven", "naclip", *OPTS, 0, 0.6, "inferno")
    assert "100.0%" not in out[p.scores] and "cosine" in out[p.scores]
    assert "NACLIP" in out[p.gallery][0][1] and "cosine" in out[p.gallery][0][1]


def test_a_click_on_the_map_shows_that_patchs_row_under_the_rule_beside_the_models_own():
    from attention.ui.vit.text_panel import MAP_SIDE
    from attention.ui.vit.text_rows import patch_rows
    from attention.vit.text.openvocab import RuleOptions
    from attention.vit.text.patchrow import patch_rows as rows_of_patch

    click = patch_rows(MAP_SIDE)
    at = gr.SelectData(None, {"index": [240, 100], "value": None})  # the 448 px map of a 14 x 14 grid: 32 px a patch
    ask = dict(img=DIGIT, mdl="digit_clip", res="auto", prompts="a 3", al=0.6, cm="inferno")
    ask |= dict(zip(("residual", "std", "gamma", "beta"), OPTS))
    out = click(at, rule="naclip", **ask)
    assert out["visible"] and "row 3, col 7" in out["label"] and "NACLIP" in out["label"]
    pr = rows_of_patch(load_vit("digit_clip", device="cpu"), DIGIT, "naclip", (3, 7), options=RuleOptions())
    h, w = out["value"].shape[:2]
    assert w > 1.5 * h and pr.rule.shape == (14, 14)  # two rows side by side
    assert not np.allclose(pr.own, pr.rule)  # the rule changed the row
    gradient = click(at, rule="chefer", **ask)
    assert gradient["value"] is None and "changes no attention" in gradient["label"]


def test_the_endpoint_answers_a_picture_the_maps_and_the_ranking(client, two_digits):
    pic, npz, info = client.predict(
        handle_file(two_digits),
        PROMPTS,
        "digit_clip",
        "native",
        "clearclip",
        "false",
        5,
        3,
        1.2,
        api_name="/text_relevance",
    )
    assert pic.endswith(".png")
    arrays = np.load(npz)
    vit = load_vit("digit_clip", device="cpu")
    want = text_relevance(vit, two_digits, PROMPTS, rules="clearclip", resolution="native")
    for rule in ("clearclip", "similarity"):
        assert arrays[rule].shape == (2, 14, 21)
        np.testing.assert_allclose(arrays[rule], want.maps(rule), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(arrays["segmentation"], want.segmentation("clearclip"))
    assert [r["prompt"] for r in info["ranking"]] == [p for p, _, _ in want.ranking()]
    assert info["rule"] == "clearclip" and info["options"] == {"clearclip": {"residual": False}}
    _, npz2, info2 = client.predict(
        handle_file(two_digits), PROMPTS, "digit_clip", "native", "clearclip", "true", api_name="/text_relevance"
    )
    assert info2["options"] == {"clearclip": {"residual": True}}
    assert not np.allclose(np.load(npz2)["clearclip"], arrays["clearclip"])  # the option reached the rule
    with pytest.raises(Exception, match="accepted: 1 to 8"):
        client.predict(handle_file(two_digits), ",".join(["a seven"] * 9), api_name="/text_relevance")
    with pytest.raises(Exception, match="pick a model that has one"):
        client.predict(handle_file(DIGIT), "a seven", "mnist_vit", api_name="/text_relevance")
    with pytest.raises(Exception, match="accepted: chefer, legrad"):
        client.predict(handle_file(DIGIT), "a seven", "digit_clip", "auto", "gradcam", api_name="/text_relevance")


def test_the_text_relevance_tool_describes_every_parameter(app_url):
    tool = schema(app_url)["text_relevance"]
    assert "text prompts" in tool["description"]
    props = tool["inputSchema"]["properties"]
    assert set(props) == {"image", "prompts", "model", "resolution", "rule", "residual", "std", "gamma", "beta"}
    assert "sclip" in props["rule"]["description"] and "paper" in props["residual"]["description"]
    assert "comma-separated" in props["prompts"]["description"]
    from attention.vit.models.registry import REGISTRY

    texts = [a for a, s in REGISTRY.items() if s.text]  # from the registry, not typed by hand
    assert len(texts) >= 3 and all(a in props["model"]["description"] for a in texts)


def test_the_cli_writes_the_picture_the_arrays_and_the_ranking(tmp_path, two_digits, capsys):
    out = tmp_path / "out"
    args = ["text", two_digits, "--prompts", PROMPTS, "--resolution", "native", "--out", str(out), "--rule", "sclip"]
    assert main(args) == 0
    folder = out / "two_digits"
    assert (folder / "text_relevance.png").exists()
    info = json.loads((folder / "text_relevance.json").read_text())
    assert {r["prompt"] for r in info["ranking"]} == {"a handwritten seven", "a handwritten three"}
    npz = np.load(folder / "text_relevance.npz")
    assert npz["sclip"].shape == (2, 14, 21) and info["rule"] == "sclip"
    meta = json.loads(str(npz["meta"]))  # the common layout's meta (attention.npzfile), as every answer's file
    assert meta["kind"] == "text_relevance" and meta["model"] == "digit_clip" and meta["grid"] == [14, 21]
    assert meta["prompts"] == PROMPTS.split(", ") and meta["arrays"]["sclip"]["axes"] == "prompts, rows, cols"
    assert "best match:" in capsys.readouterr().out
    assert main(["text", two_digits, "--prompts", "", "--out", str(out)]) == 2
    assert main(["text", two_digits, "--prompts", "a seven", "--model", "mnist_vit", "--out", str(out)]) == 2
    assert main(["text", two_digits, "--prompts", "a seven", "--std", "-1", "--out", str(out)]) == 2


def test_links_carry_the_prompts_and_refuse_bad_ones():
    from attention.errors import InputError
    from attention.vit.serve import permalink

    link = permalink.parse({"example": "digit_3", "model": "digit_clip", "find": " a three ,<b>x</b>&y=1 "})
    assert link.find == "a three, <b>x</b>&y=1"
    qs = permalink.query_string(link)
    assert qs.endswith("find=a+three,+%3Cb%3Ex%3C/b%3E%26y%3D1") and "<" not in qs
    from urllib.parse import parse_qsl

    assert permalink.parse(dict(parse_qsl(qs))) == link
    with pytest.raises(InputError, match="Link parameter find: Prompt 2 is empty"):
        permalink.parse({"find": "a three,,a seven"})


def test_links_carry_the_rule_and_its_options():
    from urllib.parse import parse_qsl

    from attention.errors import InputError
    from attention.vit.serve import permalink

    link = permalink.parse({"example": "digit_4", "find": "a 4, a 9", "frule": "SCLIP", "fres": "false", "fstd": "3"})
    assert (link.find_rule, link.find_residual, link.find_std, link.find_gamma) == ("sclip", False, 3.0, None)
    qs = permalink.query_string(link)
    assert "frule=sclip" in qs and "fres=false" in qs and "fstd=3.0" in qs and "fgamma" not in qs
    assert permalink.parse(dict(parse_qsl(qs))) == link
    with pytest.raises(InputError, match="Link parameter frule: Rule 'gradcam' is not accepted"):
        permalink.parse({"frule": "gradcam"})
    with pytest.raises(InputError, match="Link parameter fbeta: beta 20 is out of range"):
        permalink.parse({"fbeta": "20"})
    p = panel()
    fields = p.link_fields("clearclip", "false", 3.0, 3.0, 1.2)
    assert fields == {
        "find_rule": "clearclip",
        "find_residual": False,
        "find_std": 3.0,
        "find_gamma": None,
        "find_beta": None,
    }
    assert p.link_fields("sclip", "", 5.0, 3.0, 1.2) == dict.fromkeys(fields)  # the defaults: nothing in the link
    back = p.from_link(link)
    assert (back[p.rule], back[p.residual], back[p.std], back[p.gamma]) == ("sclip", "false", 3.0, 3.0)
