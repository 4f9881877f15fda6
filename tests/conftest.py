"""Shared fixtures: the app launched once in-process, a gradio_client for it, a browser, and one
digit's forward pass through mnist_vit.

The whole suite runs offline: HF_HUB_OFFLINE=1 is set before anything imports
huggingface-hub, and every hub download must come from a temporary cache the tests build.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from bench.common import answers

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="hf-home-empty-"))
os.environ.setdefault("GRADIO_TEMP_DIR", tempfile.mkdtemp(prefix="gradio-tmp-"))
os.environ.setdefault("GRADIO_EXAMPLES_CACHE", tempfile.mkdtemp(prefix="gradio-examples-"))  # never replay old caches
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("MPLBACKEND", "Agg")
# The suite is one client (127.0.0.1) opening hundreds of sessions in minutes: the shared app's per-client
# rates are lifted; the guard's limits are specified on their own (tests/crowd/test_guard.py,
# tests/ui/common/test_server.py).
os.environ.setdefault("ATTENTION_NEW_SESSIONS_PER_MIN", "1000000")
os.environ.setdefault("ATTENTION_LIVE_PER_S", "1000000")
os.environ.setdefault("ATTENTION_REFUSAL_DELAY", "0.05")  # the tests' refusals are not floods
# A thread's nice weighs against every process of the machine, not only the app's own threads: beside another
# suite (CI's loaded check), the product's 10 left the in-process app's heavy and crowded jobs a tenth of a core
# and its floods ran past their clients' timeouts (test_a_mixed_flood...: ReadTimeout at 204 s with 10, passed in
# 111 s with 2, same load). The niced path is the same at 2; tests/crowd/test_heavy_nice.py specifies it.
os.environ.setdefault("ATTENTION_HEAVY_NICE", "2")
# Visitors are told apart by client address (attention.crowd.admission): tests that need several visitors at once
# name them in X-Forwarded-For, as a proxy on loopback would (`visitor_client`); the forged-header case is
# specified on an app that trusts no proxy (tests/ui/common/test_server.py).
os.environ.setdefault("ATTENTION_TRUSTED_PROXIES", "127.0.0.1")

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"  # screenshots of browser tests (git-ignored)
DIGIT = str(ROOT / "examples" / "digits" / "digit_3.png")  # a 28x28 MNIST 3


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every browser test is slow too (a page of the served app, driven click by click): `-m "not slow"`
    leaves them out with the others (the markers: pyproject.toml). And every browser test runs after the rest, in
    its order: the session's Playwright (`browser`) keeps an event loop running in the main thread from its first
    use on, where a later test's `asyncio.run` is refused ("cannot be called from a running event loop")."""
    browser = [item for item in items if item.get_closest_marker("browser") is not None]
    for item in browser:
        item.add_marker(pytest.mark.slow)
    ids = {id(item) for item in browser}
    items[:] = [item for item in items if id(item) not in ids] + browser


@pytest.fixture
def offline_switches(monkeypatch):
    """`set(attention=False, hub=False)`: ATTENTION_OFFLINE as attention.config read it and
    HF_HUB_OFFLINE as huggingface-hub read it (both are read once, at import)."""
    import dataclasses

    from huggingface_hub import constants

    from attention.crowd import net

    def set_(attention: bool = False, hub: bool = False) -> None:
        monkeypatch.setattr(net, "SETTINGS", dataclasses.replace(net.SETTINGS, offline=attention))
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", hub)

    return set_


@pytest.fixture(scope="session")
def digit_pass():
    """DIGIT through mnist_vit at "auto" (a passes.Pass): 28x28 px, patch 4, a 7x7 grid, 4 layers, 4 heads."""
    from attention.vit.serve import passes

    return passes.get_pass(DIGIT, "mnist_vit", "auto")


@pytest.fixture(scope="session")
def app_url():
    """URL of the app, launched once for the whole session on 127.0.0.1 (a free port)."""
    import app

    _, url, _ = app.demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **app.LAUNCH)
    # "Running on local URL" prints before the server is ready: poll it
    assert answers(url.rstrip("/") + "/gradio_api/info", 60, 0.2), f"the app did not answer at {url} in 60 s"
    yield url
    app.demo.close()


@pytest.fixture(scope="session")
def client(app_url):
    """A gradio_client.Client on the running app."""
    from gradio_client import Client

    return Client(app_url, verbose=False)


@pytest.fixture(scope="session")
def visitor_client(app_url):
    """`visitor_client(i)`: a gradio_client.Client on the running app as visitor i (its own session and its
    own client address, 10.0.<i // 250>.<i % 250 + 1>, named as the trusted proxy on loopback names it)."""
    from gradio_client import Client

    def make(i: int) -> Client:
        return Client(app_url, verbose=False, headers={"X-Forwarded-For": f"10.0.{i // 250}.{i % 250 + 1}"})

    return make


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium (/usr/bin/chromium) driven by Playwright, headless."""
    if not Path("/usr/bin/chromium").exists():
        pytest.fail("/usr/bin/chromium is missing: `apt-get install -y chromium` (.ci/run does this)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield b
        b.close()


@pytest.fixture
def page(browser, app_url):
    """A fresh browser page at the app (1400x1000), its browser context closed at the end."""
    from tests.ui.pages import opened

    with opened(browser, app_url) as pg:
        yield pg


def screenshot(pg, name: str) -> Path:
    """Save a full-page screenshot as a test artefact (artifacts/NAME.png, not committed)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    pg.screenshot(path=str(path), full_page=True)
    return path
