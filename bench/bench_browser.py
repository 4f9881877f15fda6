"""What a visitor waits for in a real browser (Chromium via Playwright) on the ViT tab.

    python -m bench.bench_browser [--repeats 5] [--shots artifacts/]

Serves `python app.py` with random weights of DINO ViT-S/16 in a temporary Hugging Face cache
(HF_HUB_OFFLINE=1: the real timm/huggingface-hub loading path), so the first screen is the
720x480 photo at 480 px (30x45 patches, 6 heads). Measures, as medians over `--repeats` fresh pages:
  - page load -> the first screen's maps on screen (the start example, no click);
  - a patch click on the large map -> the updated map;
  - a layer change (a click on the Layer slider) -> the updated maps;
  - a head tile click -> the large map shows that head;
and the bytes the browser fetched for each. Each interaction reuses the visitor's pass (no
forward); the ratio to one forward pass (measured in-process, same run) is printed, for the map the
browser draws itself (attention/vit/live.py) and for the server's picture that follows it.
Screenshots at desktop (1400x1000) and phone (390x844) sizes go to `--shots`. Ends with the table
as a Markdown block for the docs (bench/blocks.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from bench.common import PHOTO, ROOT, markdown_table, median_seconds, offline_dino, readme_block, start_app


def forward_seconds(repeats: int) -> float:
    """One forward pass of the start example, in-process (what every interaction below avoids)."""
    from attention.vit import attention_maps, load_vit

    model = load_vit("dino_vits16")
    return median_seconds(lambda: attention_maps(model, PHOTO, keep_qk=True), repeats, warmup=True)


class Meter:
    """Bytes the page receives over the network (every response body, the answers' event stream
    included, as Chrome's DevTools protocol reports them; data: URLs are not fetched), reset per
    interaction."""

    def __init__(self, page) -> None:
        self.bytes, self._local = 0, set()
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.on("Network.requestWillBeSent", self._sent)
        cdp.on("Network.dataReceived", self._count)

    def _sent(self, event: dict) -> None:
        if event["request"]["url"].startswith("data:"):
            self._local.add(event["requestId"])

    def _count(self, event: dict) -> None:
        if event["requestId"] not in self._local:
            self.bytes += event["dataLength"]


WATCH = """() => {
  const t = (window.__t = { down: null, first: null, server: null });
  document.addEventListener("pointerdown", () => { t.down = performance.now(); }, { capture: true, once: true });
  const host = document.querySelector("#vit-query-image"), before = host.querySelector("img").src;
  new MutationObserver(() => {
    const e = host.querySelector("img");
    if (!e || e.src === before) return;
    const src = e.src;
    e.decode().then(() => {
      const now = performance.now();
      if (t.first === null) t.first = now;
      if (!src.startsWith("data:") && t.server === null) t.server = now;
    }).catch(() => {});
  }).observe(host, { attributes: true, subtree: true, childList: true, attributeFilter: ["src"] });
}"""


def one_visit(browser, url: str, shots: Path | None) -> dict[str, tuple[float, float, int]]:
    """{interaction: (seconds to the first new map on screen, seconds to the server's map, bytes)}."""
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    meter = Meter(pg)
    out = {}
    t = time.perf_counter()
    pg.goto(url)
    pg.wait_for_selector("#vit-gallery img", timeout=120_000)
    pg.wait_for_function("() => [...document.querySelectorAll('#vit-gallery img')].every(e => e.complete)")
    seconds = time.perf_counter() - t
    pg.wait_for_function("() => (window.attentionLive || {}).base", timeout=30_000)  # the background fetch too
    out["page load -> maps on screen"] = (seconds, seconds, meter.bytes, float("nan"))
    if shots:
        pg.screenshot(path=str(shots / "bench_desktop.png"))

    def timed(name: str, act) -> None:
        pg.wait_for_timeout(300)
        pg.evaluate(WATCH)
        meter.bytes = 0
        act()
        pg.wait_for_function("() => window.__t.server !== null", timeout=30_000)
        pg.wait_for_timeout(1000)  # what the browser fetches after the answer (a new layer's q/k) counts too
        live = "(window.attentionLive || {})"
        t = pg.evaluate(f"({{...window.__t, painted: {live}.paintedAt || null, tiles: {live}.tilesAt || null}})")
        if t["painted"] is not None and t["painted"] > t["down"]:  # drawn here: the frame it was painted in
            t["first"] = min(t["first"] or t["painted"], t["painted"])
        tiles = (t["tiles"] - t["down"]) / 1000 if t["tiles"] is not None and t["tiles"] > t["down"] else float("nan")
        out[name] = ((t["first"] - t["down"]) / 1000, (t["server"] - t["down"]) / 1000, meter.bytes, tiles)

    img = pg.locator("#vit-query-image img")
    box = img.bounding_box()
    timed("patch click -> updated map", lambda: img.click(position={"x": box["width"] * 0.3, "y": box["height"] * 0.4}))
    rng = pg.locator("#vit-layer input[type=range]")
    rb = rng.bounding_box()
    timed("layer change -> updated maps", lambda: rng.click(position={"x": rb["width"] * 0.5, "y": rb["height"] / 2}))
    tiles = pg.locator("#vit-gallery .thumbnail-item")
    timed("head tile click -> that head large", lambda: tiles.nth(3).click())
    out["drawn in the browser"] = pg.evaluate("window.attentionLive.drawn")
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
    offline_dino("bench-browser", force=True)  # this process's environment, the app's too
    with start_app(dict(os.environ), args.port, timeout=120) as srv:
        url = srv.url
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
    fwd = forward_seconds(3)
    print(f"ViT-S/16 (random weights) on chelsea.jpg 720x480 at 480 px; {args.repeats} fresh pages; 2 cores")
    print(f"one forward pass in-process: {fwd:.3f} s")
    print(f"{'interaction':36s} {'map s':>7s} {'/ fwd':>6s} {'tiles s':>8s} {'server s':>9s} {'/ fwd':>6s} {'kB':>7s}")
    medians = {}
    for name in runs[0]:
        if name == "drawn in the browser":
            continue
        first, server, kb, tiles = medians[name] = tuple(statistics.median(r[name][i] for r in runs) for i in range(4))
        print(
            f"{name:36s} {first:7.3f} {first / fwd:6.2f} {tiles:8.3f} {server:9.3f} {server / fwd:6.2f} {kb / 1e3:7.0f}"
        )
    print(f"maps drawn in the browser per visit: {[r['drawn in the browser'] for r in runs]}")
    print("map s: from the pointer going down until the new large map is on screen (drawn in the browser: the")
    print("frame it is painted in); tiles s: until the browser has drawn the head tiles too (nan: it draws none,")
    print("a head click leaves them as they are); server s: until the server's own large map is decoded; kB: every")
    print("response")
    print("body the interaction caused (the answer's event stream and the maps asked for included; page load: until")
    print("the base picture for drawing is in)")
    print(
        f"screenshots: {args.shots}/bench_desktop.png, bench_desktop_after.png, bench_phone.png, bench_phone_full.png"
    )
    print(readme_block("bench_browser", "interactions", interactions_table(medians, fwd)))


def interactions_table(medians: dict[str, tuple[float, float, float, float]], fwd: float) -> str:
    """{interaction: (map s, server s, bytes, tiles s)} and one forward's seconds, as a Markdown table."""
    header = ["interaction", "map s", "/ forward", "tiles s", "server s", "/ forward", "kB"]
    return markdown_table(
        header,
        [
            (name, f"{m:.3f}", f"{m / fwd:.2f}", f"{t:.3f}", f"{s:.3f}", f"{s / fwd:.2f}", f"{b / 1e3:.0f}")
            for name, (m, s, b, t) in medians.items()
        ],
    )


if __name__ == "__main__":
    main()
