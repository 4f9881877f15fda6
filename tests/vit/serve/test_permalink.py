"""Permalinks: a view as URL parameters and back; bad parameters are named with what is accepted."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from attention.config import EXAMPLES_DIR
from attention.errors import InputError
from attention.vit.serve import permalink
from attention.vit.serve.permalink import Link


def test_a_full_link_round_trips():
    link = Link(example="chelsea", model="dino_vits16", resolution="auto", layer=9, head=2, view="fig3", query=(5, 7))
    text = permalink.query_string(link)
    assert text == "example=chelsea&model=dino_vits16&res=auto&layer=9&head=2&view=fig3&q=5,7"
    assert permalink.parse(dict(parse_qsl(text))) == link


def test_absent_parameters_stay_unset_and_cls_is_spelled_out():
    assert permalink.parse({}) == Link()
    assert permalink.query_string(Link()) == ""
    assert permalink.parse({"q": "cls", "layer": "-1"}) == Link(query="cls", layer=-1)
    assert permalink.query_string(Link(query="cls")) == "q=cls"


def test_unknown_parameters_are_ignored():
    assert permalink.parse({"utm_source": "x", "__theme": "dark"}) == Link()


@pytest.mark.parametrize(
    "params, message",
    [
        ({"example": "../../etc/passwd"}, "example='../../etc/passwd' is not a shipped example; accepted: "),
        ({"layer": "nine"}, "layer='nine' is not a whole number; accepted: 0, 1, 2"),
        ({"head": "1.5"}, "head='1.5' is not a whole number"),
        ({"q": "5"}, "q='5' is not a query; accepted: a token name"),
        ({"q": "-1,2"}, "is not a query"),
        ({"view": "everything"}, "everything"),
    ],
)
def test_a_bad_parameter_is_named_with_what_is_accepted(params, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(".", r"\.")):
        permalink.parse(params)


def test_examples_are_named_by_file_and_recognised_by_content(tmp_path):
    names = permalink.examples()
    assert {"chelsea", "astronaut", "digit_0", "digit_9"} <= set(names)
    copy = tmp_path / "upload.png"  # a served copy of an example, under another name
    copy.write_bytes((EXAMPLES_DIR / "digits" / "digit_3.png").read_bytes())
    assert permalink.example_name(str(copy)) == "digit_3"
    other = tmp_path / "other.png"
    other.write_bytes(copy.read_bytes() + b"\0")
    assert permalink.example_name(str(other)) is None and permalink.example_name(None) is None


def test_the_explained_class_travels_as_class():
    link = Link(example="digit_3", model="mnist_vit", cls=8)
    text = permalink.query_string(link)
    assert text == "example=digit_3&model=mnist_vit&class=8"
    assert permalink.parse(dict(parse_qsl(text))) == link
    with pytest.raises(InputError, match="class=.*accepted"):
        permalink.parse({"class": "tabby"})


def test_the_pictures_style_and_rollout_options_round_trip():
    params = dict(example="digit_3", view="rollout", cmap="viridis", thr="0.8", alpha="0.4", fusion="max")
    params |= dict(discard="0.5", rule="global")
    link = permalink.parse(params)
    assert (link.cmap, link.threshold, link.alpha, link.fusion, link.discard, link.rule) == (
        "viridis", 0.8, 0.4, "max", 0.5, "global"
    )  # fmt: skip
    again = permalink.parse(dict(p.split("=") for p in permalink.query_string(link).split("&")))
    assert again == link


@pytest.mark.parametrize(
    "key,value,words",
    [
        ("cmap", "nope", "Unknown colormap"),
        ("thr", "2", "thr"),
        ("fusion", "avg", "fusion='avg'"),
        ("rule", "x", "rule"),
    ],
)
def test_a_bad_style_parameter_is_named(key, value, words):
    with pytest.raises(InputError, match=words):
        permalink.parse({key: value})
