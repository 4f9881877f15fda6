"""Visitor text never renders as HTML: markup in a permalink's parameters, a typed model name or a
matrix's text shows as the characters typed in the page's toasts, with no element created and no
request made (a tracker on 127.0.0.1 counts the requests a rendered <img> would make)."""

from __future__ import annotations

import http.server
import threading
from urllib.parse import quote

import pytest

from tests.conftest import screenshot

MARKUP_ELEMENTS = (
    "() => document.querySelectorAll('#injected, [data-testid=toast-body] img, input[type=password]').length"
)


@pytest.fixture(scope="module")
def tracker():
    """A tiny HTTP server on 127.0.0.1 that counts the requests it gets: (base URL, hits list)."""
    hits: list[str] = []

    class Count(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the standard library's name
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Count)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()


def markup(base: str, name: str) -> str:
    """An image that fetches the tracker, with an id the page must not contain."""
    return f"<img id=injected src={base}/{name}.png onerror=this.src='{base}/{name}-onerror.png'>"


def shown_as_text(pg, hits: list[str], typed: str) -> None:
    """The toast holding `typed` shows it literally, and nothing rendered: no element, no request."""
    toast = pg.get_by_test_id("toast-body").filter(has_text=typed[:12])
    toast.first.wait_for()
    assert typed in toast.first.inner_text()
    pg.wait_for_timeout(500)  # time for a rendered image to be requested
    assert pg.evaluate(MARKUP_ELEMENTS) == 0
    assert hits == []


@pytest.mark.browser
@pytest.mark.parametrize(
    "param",
    ["model", "example", "res", "q", "view"],
)
def test_markup_in_a_permalink_parameter_shows_as_text(page, app_url, tracker, param):
    base, hits = tracker
    hits.clear()
    typed = markup(base, param)
    page.goto(f"{app_url.rstrip('/')}/?{param}={quote(typed)}")
    shown_as_text(page, hits, typed if param != "q" else typed.lower())
    screenshot(page, f"escaping_permalink_{param}")


@pytest.mark.browser
def test_a_phishing_form_in_a_permalink_shows_as_text(page, app_url, tracker):
    _, hits = tracker
    hits.clear()
    typed = "<form action=https://evil.example><input type=password name=p><a href=https://evil.example>log in"
    page.goto(f"{app_url.rstrip('/')}/?model={quote(typed)}")
    shown_as_text(page, hits, typed)
    assert page.evaluate("() => document.querySelectorAll('form[action*=evil], a[href*=evil]').length") == 0


@pytest.mark.browser
def test_markup_typed_as_a_model_name_shows_as_text(page, tracker):
    base, hits = tracker
    page.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
    hits.clear()
    typed = markup(base, "model-box")
    box = page.locator("#vit-model input")
    box.fill(typed)
    box.press("Enter")
    shown_as_text(page, hits, typed)


@pytest.mark.browser
def test_markup_in_a_matrix_shows_as_text(page, tracker):
    base, hits = tracker
    hits.clear()
    page.get_by_role("tab", name="Q/K/V calculator").click()
    page.locator("#qkv-edit-as").get_by_label("Text").check()
    q = page.locator("#qkv-text-q textarea")
    q.wait_for()
    typed = markup(base, "matrix")
    q.fill(typed)
    page.locator("#qkv-go").click()
    shown_as_text(page, hits, typed.split()[0])  # the message quotes the first token that is not a number
    page.locator("#qkv-stale-note").get_by_text("Not recalculated").wait_for()
    assert page.evaluate(MARKUP_ELEMENTS) == 0 and hits == []
