"""Spec of the package's typed errors and its one whole-number test."""

from __future__ import annotations

from html.parser import HTMLParser

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attention.errors import (
    AttentionError,
    ImageError,
    InputError,
    ModelLoadError,
    as_whole,
    check_int,
    html_text,
    markdown_text,
)


def test_every_user_error_is_an_attention_error():
    assert issubclass(InputError, AttentionError) and issubclass(ImageError, InputError)
    assert issubclass(ModelLoadError, AttentionError) and issubclass(InputError, ValueError)


@pytest.mark.parametrize(
    "value, want",
    [
        (3, 3),
        (-1, -1),
        (3.0, 3),
        ("3", 3),
        (" 4.0 ", 4),
        (np.int64(7), 7),
        (np.float32(2.0), 2),
        (2**40, 2**40),
        (1e300, int(1e300)),  # a large float is whole
    ],
)
def test_as_whole_takes_whole_numbers_in_any_spelling(value, want):
    assert as_whole(value) == want and type(as_whole(value)) is int


@pytest.mark.parametrize("value", [2.5, -0.5, float("nan"), float("inf"), -float("inf"), "abc", "", None, [1], "2.5"])
def test_as_whole_refuses_everything_else(value):
    assert as_whole(value) is None


def test_check_int_names_the_value_and_the_range():
    assert check_int(5.0, "n", 1, 9) == 5
    with pytest.raises(InputError, match=r"n must be a whole number from 1 to 9, got 2\.5"):
        check_int(2.5, "n", 1, 9)
    with pytest.raises(InputError, match="n = 10 is out of range: expected 1 to 9"):
        check_int(10, "n", 1, 9)
    with pytest.raises(InputError, match="out of range"):  # a huge whole number is out of range, not "not whole"
        check_int(2**63 + 1, "seed", 0, 2**31 - 1)


class _Tags(HTMLParser):
    """An independent reader of HTML: the tags a browser would build from a string."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text += data


def rendered(html_string: str) -> _Tags:
    p = _Tags()
    p.feed(html_string)
    p.close()
    return p


@pytest.mark.parametrize(
    "typed",
    [
        "<img src=http://127.0.0.1:7931/track.png>",
        "<form action=https://evil.example><input type=password name=p>",
        '<a href="https://evil.example">log in again</a>',
        "<script>alert(1)</script>",
        "&lt;img src=x&gt; (already an entity)",
        "<<img src=x>>",
        "x >= 1 & y < 2",
    ],
)
def test_html_text_shows_markup_as_the_characters_typed(typed):
    page = rendered(f"<div>{html_text(typed)}</div>")
    assert page.tags == ["div"] and page.text == typed


def markdown_rendered(text: str) -> _Tags:
    """`text` rendered as CommonMark (markdown-it, tables on, HTML allowed as Gradio's Markdown allows it), parsed."""
    from markdown_it import MarkdownIt

    return rendered(MarkdownIt("commonmark", {"html": True}).enable("table").render(text))


MARKDOWN_TYPED = [
    "![a](http://127.0.0.1:7931/x.png) a a",
    "[Log in](https://evil.example/login)",
    "<https://evil.example> and <a@evil.example>",
    "**bold** _it_ `code` ~~gone~~ \\*not\\*",
    "# heading\n\n- item\n\n> quote\n\n---",
    "| a | b |\n| - | - |\n| 1 | 2 |",
    "[x]: https://evil.example/ref\n\n[x]",
    "<img src=x onerror=alert(1)> &amp; &lt; x >= 1",
    "    indented code",
]


@pytest.mark.parametrize("typed", MARKDOWN_TYPED)
def test_markdown_text_shows_markdown_and_html_as_the_characters_typed(typed):
    """One paragraph with no element in it, its text the characters typed (line breaks as spaces)."""
    page = markdown_rendered(markdown_text(typed))
    assert page.tags == ["p"] and page.text.strip() == typed.replace("\n", " ").strip()
    html_block = rendered(markdown_text(typed))  # the same inside an HTML block of a Markdown component
    assert html_block.tags == [] and html_block.text == typed.replace("\n", " ")


@given(st.text(alphabet=st.sampled_from("![]()<>&;#*_`~-+.:/@=|\\ \nabhtpsx0123")))
def test_markdown_text_never_makes_an_element_and_reads_back_exactly(typed):
    page = markdown_rendered(f"x {markdown_text(typed)} x")
    assert page.tags == ["p"] and page.text.strip() == f"x {typed.replace(chr(10), ' ')} x"


@given(st.text(alphabet=st.sampled_from("<>&;#x/=\"' abimgscrpt0123456789")))
def test_html_text_never_opens_a_tag_and_reads_back_exactly(typed):
    page = rendered(f"<p>{html_text(typed)}</p>")
    assert page.tags == ["p"] and page.text == typed
