"""What a visitor waits for in a real browser (Chromium via Playwright) on the ViT tab.

    python bench/bench_browser.py [--repeats 5] [--shots artifacts/]

Serves `python app.py` with random weights of DINO ViT-S/16 in a temporary Hugging Face cache
(HF_HUB_OFFLINE=1: the real timm/huggingface-hub loading path), so the first screen is the
720x480 photo at 480 px (30x45 patches, 6 heads). Measures, as medians over `--repeats` fresh pages:
  - page load -> the first screen's maps on screen (the start example, no click);
  - a patch click on the large map -> the updated map;
  - a layer change (a click on the Layer slider) -> the updated maps;
  - a head tile click -> the large map shows that head;
and the bytes the browser fetched for each. Each interaction reuses the visitor's pass (no
forward); the ratio to one forward pass (measured in-process, same run) is printed.
Screenshots at desktop (1400x1000) and phone (390x844) sizes go to `--shots`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_app_roundtrip import fake_hub_cache  # noqa: E402


def serve(home: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "GRADIO_SERVER_PORT": str(port)}
    srv = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    for _ in range(240):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
            return srv
        except OSError:
            time.sleep(0.5)
    srv.kill()
    raise SystemExit("the app did not start")


def forward_seconds(home: Path, repeats: int) -> float:
    """One forward pass of the start example, in-process (what every interaction below avoids)."""
    from attention.vit import attention_maps, load_vit

    model = load_vit("dino_vits16")
    img = ROOT / "examples" / "photos" / "chelsea.jpg"
    attention_maps(model, img, keep_qk=True)
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        attention_maps(model, img, keep_qk=True)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


class Meter:
    """Bytes of every response the page receives (body sizes), reset per interaction."""

    def __init__(self, page) -> None:
        self.bytes = 0
        page.on("response", self._count)

    def _count(self, response) -> None:
        try:
            self.bytes += len(response.body())
        except Exception:  # noqa: BLE001 - streams and redirects have no body to count
            pass


def big_src(pg) -> str:
    return pg.locator("#vit-query-image img").get_attribute("src") or ""


def wait_new(pg, before: str) -> None:
    pg.wait_for_function("b => (document.querySelector('#vit-query-image img') || {}).src !== b", arg=before)
    pg.wait_for_function("() => { const e = document.querySelector('#vit-query-image img'); return e.complete }")


def one_visit(browser, url: str, shots: Path | None) -> dict[str, tuple[float, int, float]]:
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    meter = Meter(pg)
    out = {}
    t = time.perf_counter()
    pg.goto(url)
    pg.wait_for_selector("#vit-gallery img", timeout=120_000)
    pg.wait_for_function("() => [...document.querySelectorAll('#vit-gallery img')].every(e => e.complete)")
    out["page load -> maps on screen"] = (time.perf_counter() - t, meter.bytes, float("nan"))
    if shots:
        pg.screenshot(path=str(shots / "bench_desktop.png"))

    def timed(name: str, act) -> None:
        pg.wait_for_timeout(300)
        before, meter.bytes = big_src(pg), 0
        t0 = pg.evaluate("performance.now()")
        t = time.perf_counter()
        act()
        wait_new(pg, before)
        seconds = time.perf_counter() - t
        # when the browser began to fetch the new map = when the answer had arrived and was applied
        start = pg.evaluate("s => (performance.getEntriesByName(s)[0] || {}).startTime", big_src(pg))
        out[name] = (seconds, meter.bytes, (start - t0) / 1000 if start is not None else float("nan"))

    img = pg.locator("#vit-query-image img")
    box = img.bounding_box()
    timed("patch click -> updated map", lambda: img.click(position={"x": box["width"] * 0.3, "y": box["height"] * 0.4}))
    rng = pg.locator("#vit-layer input[type=range]")
    rb = rng.bounding_box()
    timed("layer change -> updated maps", lambda: rng.click(position={"x": rb["width"] * 0.5, "y": rb["height"] / 2}))
    tiles = pg.locator("#vit-gallery .thumbnail-item")
    timed("head tile click -> that head large", lambda: tiles.nth(3).click())
    if shots:
        pg.screenshot(path=str(shots / "bench_desktop_after.png"))
    pg.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--port", type=int, default=7890)
    ap.add_argument("--shots", type=Path, default=ROOT / "artifacts")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    args.shots.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="bench-browser-hf-"))
    os.environ.update(HF_HOME=str(home), HF_HUB_OFFLINE="1")  # before huggingface-hub reads them
    fake_hub_cache(home)
    srv = serve(home, args.port)
    try:
        url = f"http://127.0.0.1:{args.port}/"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium")
            runs = [one_visit(browser, url, args.shots if i == 0 else None) for i in range(args.repeats)]
            phone = browser.new_page(viewport={"width": 390, "height": 844})
            phone.goto(url)
            phone.wait_for_selector("#vit-gallery img", timeout=120_000)
            phone.wait_for_timeout(500)
            phone.screenshot(path=str(args.shots / "bench_phone.png"))
            phone.screenshot(path=str(args.shots / "bench_phone_full.png"), full_page=True)
            browser.close()
    finally:
        srv.terminate()
    fwd = forward_seconds(home, 3)
    print(f"ViT-S/16 (random weights) on chelsea.jpg 720x480 at 480 px; {args.repeats} fresh pages; 2 cores")
    print(f"one forward pass in-process: {fwd:.3f} s")
    print(f"{'interaction':40s} {'median s':>9s} {'/ forward':>10s} {'median kB':>10s} {'answer in s':>12s}")
    for name in runs[0]:
        s = statistics.median(r[name][0] for r in runs)
        kb = statistics.median(r[name][1] for r in runs) / 1e3
        ans = statistics.median(r[name][2] for r in runs)
        print(f"{name:40s} {s:9.3f} {s / fwd:10.2f} {kb:10.0f} {ans:12.3f}")
    print("answer in s: from the click until the browser starts fetching the new map (the server's answer applied)")
    print(
        f"screenshots: {args.shots}/bench_desktop.png, bench_desktop_after.png, bench_phone.png, bench_phone_full.png"
    )


if __name__ == "__main__":
    main()
