"""Visitor text never renders as HTML: markup in a permalink's parameters, a typed model name or a
matrix's text shows as the characters typed in the page's toasts, with no element created and no
request made (a tracker on 127.0.0.1 answers the requests a rendered <img> would make; the page's requests
to it are recorded in the order the browser makes them)."""

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
    """A tiny HTTP server on 127.0.0.1 that answers any GET with an empty PNG: its base URL."""

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the standard library's name
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def asked(page, tracker):
    """(tracker URL, the URLs this page asks of it, in the order the browser asks them), recorded from
    before the test's first step."""
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url) if r.url.startswith(tracker) else None)
    return tracker, urls


def markup(base: str, name: str) -> str:
    """An image that fetches the tracker, with an id the page must not contain."""
    return f"<img id=injected src={base}/{name}.png onerror=this.src='{base}/{name}-onerror.png'>"


def shown_as_text(pg, asked: tuple[str, list[str]], typed: str) -> None:
    """The toast holding `typed` shows it literally, and nothing rendered: no element, no request.
    An <img> the page rendered would have asked the tracker when it was made, before the toast showed;
    a canary picture asked now comes after any such request: once the browser has asked for it, the
    requests before it are all there is."""
    base, urls = asked
    toast = pg.get_by_test_id("toast-body").filter(has_text=typed[:12])
    toast.first.wait_for()
    assert typed in toast.first.inner_text()
    assert pg.evaluate(MARKUP_ELEMENTS) == 0
    canary = f"{base}/canary.png"
    with pg.expect_request(canary):
        pg.evaluate("u => { new Image().src = u }", canary)
    assert urls == [canary]


@pytest.mark.browser
@pytest.mark.parametrize(
    "param",
    ["model", "example", "res", "q", "view"],
)
def test_markup_in_a_permalink_parameter_shows_as_text(page, app_url, asked, param):
    typed = markup(asked[0], param)
    page.goto(f"{app_url.rstrip('/')}/?{param}={quote(typed)}")
    shown_as_text(page, asked, typed if param != "q" else typed.lower())
    screenshot(page, f"escaping_permalink_{param}")


@pytest.mark.browser
def test_a_phishing_form_in_a_permalink_shows_as_text(page, app_url, asked):
    typed = "<form action=https://evil.example><input type=password name=p><a href=https://evil.example>log in"
    page.goto(f"{app_url.rstrip('/')}/?model={quote(typed)}")
    shown_as_text(page, asked, typed)
    assert page.evaluate("() => document.querySelectorAll('form[action*=evil], a[href*=evil]').length") == 0


@pytest.mark.browser
def test_markup_typed_as_a_model_name_shows_as_text(page, asked):
    page.locator("#vit-gallery").get_by_text("mean of heads").first.wait_for()
    typed = markup(asked[0], "model-box")
    box = page.locator("#vit-model input")
    box.fill(typed)
    box.press("Enter")
    shown_as_text(page, asked, typed)


@pytest.mark.browser
def test_markup_in_a_matrix_shows_as_text(page, asked):
    page.get_by_role("tab", name="Q/K/V calculator").click()
    page.locator("#qkv-edit-as").get_by_label("Text").check()
    q = page.locator("#qkv-text-q textarea")
    q.wait_for()
    typed = markup(asked[0], "matrix")
    q.fill(typed)
    page.locator("#qkv-go").click()
    shown_as_text(page, asked, typed.split()[0])  # the message quotes the first token that is not a number
    page.locator("#qkv-stale-note").get_by_text("Not recalculated").wait_for()
    assert page.evaluate(MARKUP_ELEMENTS) == 0 and asked[1] == [f"{asked[0]}/canary.png"]


def markdown_and_markup(base: str, name: str) -> str:
    """Markdown's image and link, an autolinked address, and an HTML image: each would make a request of the
    tracker or a link in the page if rendered."""
    return (
        f"![a]({base}/{name}-md.png) a a [Log in](https://evil.example/{name}) www.evil.example "
        f"<img id=injected src={base}/{name}-html.png>"
    )


LINKS = '() => document.querySelectorAll(\'a[href*=evil], img[src*="127.0.0.1"]:not([src*="/gradio_api/"])\').length'


@pytest.mark.browser
@pytest.mark.parametrize("param", ["example", "model", "res", "layer", "head", "view", "q", "class", "find"])
def test_markdown_and_markup_in_every_permalink_parameter_render_as_text(page, app_url, asked, param):
    """Issue 49: `?model=digit_clip&find=![a](http://HOST/x.png) a a` made every visitor fetch that URL; now no
    parameter's Markdown or HTML becomes an image, a link or an element (the "Find in image" prompts are
    opened on digit_clip, whose panel shows them), and the page asks the tracker nothing."""
    base = asked[0]
    typed = markdown_and_markup(base, param)
    extra = ""
    if param == "find":  # prompts the link accepts (up to 100 characters each), so the panel shows them
        typed = f"![a]({base}/find-md.png) a a, [Log in](https://evil.example/find), <img src={base}/find-html.png>"
        extra = "&example=digit_3&model=digit_clip"
    page.goto(f"{app_url.rstrip('/')}/?{param}={quote(typed)}{extra}")
    drawn = page.locator("#vit-gallery").get_by_text("mean of heads")
    drawn.or_(page.get_by_test_id("toast-body")).first.wait_for()  # the first screen, or a refusal's toast
    if param == "find":
        shown = page.locator("#vit-find-scores table").or_(page.locator("#vit-find-details").get_by_text("⚠️"))
        shown.first.wait_for()
    page.wait_for_timeout(1500)  # the panels that follow the first screen
    assert page.evaluate(MARKUP_ELEMENTS) == 0 and page.evaluate(LINKS) == 0
    canary = f"{base}/canary.png"
    with page.expect_request(canary):
        page.evaluate("u => { new Image().src = u }", canary)
    assert asked[1] == [canary]
    screenshot(page, f"escaping_markdown_{param}")
