"""Make the screenshots README.md and docs/ show (docs/img/*.png), from the app as a visitor sees it offline.

    python examples/make_screenshots.py

Serves `python app.py` offline (HF_HUB_OFFLINE=1, an empty Hugging Face cache: the ViT tab starts with
`mnist_vit`, whose weights ship in weights/), opens it in Debian's Chromium through Playwright at 1280x900
with the guided tour's invitation skipped, and saves one picture per tab: the ViT tab's first screen, the MNIST
retrieval tab once its database is drawn, the Q/K/V calculator after its Calculate button. The pictures are
reduced to 256 colours (a few tens of kB each).
"""

from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "img"
sys.path.insert(0, str(ROOT))

from bench.common import app_env, start_app  # noqa: E402


def shrink(path: Path) -> None:
    """The screenshot as a 256-colour PNG (the pages are flat colours and a few maps)."""
    Image.open(path).convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def main() -> None:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with start_app(app_env("screens")) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(server.url)
        page.wait_for_selector("#vit-gallery img", timeout=180_000)
        page.wait_for_function("() => [...document.querySelectorAll('#vit-gallery img')].every(e => e.complete)")
        page.get_by_role("button", name="Skip").click()  # the tour's invitation
        page.wait_for_timeout(1500)
        page.screenshot(path=str(OUT / "vit.png"))
        page.get_by_role("tab", name="MNIST retrieval").click()
        page.wait_for_selector("#retrieval-db img", timeout=120_000)
        page.wait_for_timeout(4000)
        page.screenshot(path=str(OUT / "retrieval.png"))
        page.get_by_role("tab", name="Q/K/V calculator").click()
        page.locator("#qkv-go").click()
        page.wait_for_timeout(4000)
        page.evaluate("window.scrollTo(0, 0)")
        page.wait_for_timeout(500)
        page.screenshot(path=str(OUT / "calculator.png"))
        browser.close()
    for name in ("vit.png", "retrieval.png", "calculator.png"):
        shrink(OUT / name)
        print(OUT / name, (OUT / name).stat().st_size // 1024, "kB")


if __name__ == "__main__":
    main()
