"""bench_abuse's attacks on the views that need whole attention matrices, visitor text and videos (issue 49).

    python -m bench.bench_abuse_views [--settle 60] [--only rollout_2,rollout_20,mcp_agents,markdown_link,video_18]
                                      [--max-seconds 120] [--scale 1.0]

Runs `bench.bench_abuse`'s loop (the app in its own process on loopback, the honest visitor calling /attention_maps
one call after another in a process of its own, the server's RSS sampled, --settle s after each attack) with these
attacks, registered beside `bench.abuse_heavy`'s, and prints their table with a verdict per goal:

  rollout_2      n /attention_maps calls with view=rollout at 256 px (4,096 tokens; a rollout priced over
                 ATTENTION_ROLLOUT_LIGHT_GFLOP: the heavy lane) from 2 sessions of one address, sent at once
  rollout_20     the same from 20 sessions of one address
  mcp_agents     8 MCP agents behind one address, each calling the attention_maps tool again as soon as it is
                 answered (refused or not), until --max-seconds / 4
  markdown_link  the permalink `?example=digit_3&model=digit_clip&find=![a](LISTENER/x.png) a a, [Log in](...)`
                 opened in Chromium (Debian's /usr/bin/chromium) n times, with a listener on loopback
                 (goal: it receives nothing); Chromium at nice BENCH_BROWSER_NICE (19: the visitor's browser is
                 on its own machine on a Space; 0: level with the server on loopback's cores)
  video_18       n uploads of an 18-frame clip (512x512, 30 fps) to /attention_video at 512 px and 120 fps
                 (issue 49: accepted at 5,028 GFLOP, then refused mid-way; goal: each runs to the end or is
                 refused before it starts)
Goals: the honest visitor's /attention_maps p95 <= 3x quiet; under rollout_2, rollout_20 and video_18 another
visitor's relevance and 1 s video each within 3x their quiet time plus one attacker job (timed quiet); RSS
--settle s after within 10% of before; markdown_link: the listener received nothing.
"""

from __future__ import annotations

import http.server
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import httpx
import numpy as np

from bench import abuse_heavy as heavy
from bench import bench_abuse
from bench import bench_load as bl
from bench.common import readme_block

ROLLOUT = "rollout at 256 px"
VIDEO_18 = "18-frame video at 512 px, 120 fps"
BROWSER_NICE = int(os.environ.get("BENCH_BROWSER_NICE", "19"))
"""markdown_link's Chromium (the visitor's browser, which on a Space is on the visitor's machine) runs at this nice
here, below the server and the honest visitor it shares loopback's cores with (0: level with them)."""
EXTRA: list[tuple[str, bool]] = []  # verdicts bench_abuse's loop does not know (the listener's)


def _clip18() -> str:
    """The issue's clip: 18 frames of 512x512 at 30 fps (0.6 s), each its own."""
    from tests.video_clips import encode

    path = os.path.join(bl.TEMP[5], "clip18.mp4")
    if not os.path.exists(path):
        g = np.random.default_rng(18)
        encode(path, [(g.random((512, 512, 3)) * 255).astype(np.uint8) for _ in range(18)], fps=30)
    return path


_job_args = heavy._job_args


def job_args(kind: str, i: int) -> tuple[tuple, dict]:
    """`abuse_heavy._job_args`, with this bench's kinds: a rollout at 256 px, the issue's 18-frame video."""
    from gradio_client import handle_file

    if kind == ROLLOUT:
        args = (handle_file(heavy._noise(i, 256)), "mnist_vit")
        return args, {"resolution": "256", "view": "rollout", "api_name": "/attention_maps"}
    if kind == VIDEO_18:
        return (handle_file(_clip18()), "mnist_vit"), {"resolution": "512", "fps": 120, "api_name": "/attention_video"}
    return _job_args(kind, i)


def _flood(kind: str, name: str, sessions: int):
    """n jobs of `kind` from `sessions` sessions of one address, sent at once while the honest heavy visitor calls."""

    def attack(app, page, n, max_s):
        cs = heavy._sessions(heavy.ATTACKER, sessions)
        calls = [(cs[i % sessions], *job_args(kind, i)) for i in range(n)]
        got, note, ok = heavy._honest_during(lambda: heavy._submit_all(calls, max_s), name)
        return got, note + (" [goal met]" if ok else " [GOAL MISSED]")

    attack.__name__ = name
    return attack


def mcp_agents(app, page, n, max_s):
    """8 agents of one address, each looping on the attention_maps tool until max_s / 4."""
    data = heavy._png_data_url(7, 28)
    deadline = time.time() + max_s / 4
    heavy.mark()

    def agent(i: int) -> list[str]:
        out = []
        with httpx.Client(headers={"X-Forwarded-For": heavy.ATTACKER}) as http:
            while time.time() < deadline:
                out.append(heavy._mcp_call(http, app.url, "attention_maps", {"image": data, "model": "mnist_vit"}))
        return out

    with ThreadPoolExecutor(8) as pool:
        out = [r for rs in pool.map(agent, range(8)) for r in rs]
    got = {k: out.count(k) for k in set(out)}
    return {
        **got,
        "sent": len(out),
    }, f"8 agents of one address for {max_s / 4:.0f} s: {len(out) / (max_s / 4):.0f} calls/s"


def markdown_link(app, page, n, max_s):
    """The issue's permalink opened n times in Chromium; a listener on loopback counts what it receives."""
    from playwright.sync_api import sync_playwright

    got: list[str] = []

    class Listen(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the standard library's name
            got.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Listen)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    find = f"![a]({base}/x.png) a a, [Log in]({base}/login), <img src={base}/html.png>"
    url = f"{app.url}?example=digit_3&model=digit_clip&find={quote(find)}"
    heavy.mark()
    opened = links = 0

    def visit() -> None:  # in a thread at BROWSER_NICE: Playwright's driver and Chromium are born at its nice
        nonlocal opened, links
        if BROWSER_NICE:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BROWSER_NICE)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium")
            for _ in range(n):
                pg = browser.new_page()
                pg.set_extra_http_headers({"X-Forwarded-For": "10.77.0.1"})
                pg.goto(url)
                pg.locator("#vit-find-scores table").or_(
                    pg.locator("#vit-find-details").get_by_text("⚠️")
                ).first.wait_for(timeout=120_000)
                pg.wait_for_timeout(1000)
                links = pg.evaluate(
                    f'() => document.querySelectorAll(\'a[href^="{base}"], img[src^="{base}"]\').length'
                )
                opened += 1
                pg.close()
            browser.close()

    try:
        with ThreadPoolExecutor(1) as ex:
            ex.submit(visit).result()
    finally:
        server.shutdown()
    ok = not got and not links
    EXTRA.append(("markdown_link: the listener on loopback received nothing, no link or image made", ok))
    note = (
        f"opened {opened} times; the listener received {len(got)} requests {got[:3]}; links/images in the page: {links}"
    )
    return {"opened": opened, "sent": opened}, note


ATTACKS = {
    "rollout_2": (_flood(ROLLOUT, "rollout_2", 2), 6),
    "rollout_20": (_flood(ROLLOUT, "rollout_20", 20), 40),
    "mcp_agents": (mcp_agents, 8),
    "markdown_link": (markdown_link, 3),
    "video_18": (_flood(VIDEO_18, "video_18", 1), 2),
}


def register() -> None:
    """This bench's attacks and their jobs, beside `abuse_heavy`'s, for `bench_abuse`'s loop."""
    heavy._job_args = job_args
    heavy.JOB_KINDS = (*heavy.JOB_KINDS, ROLLOUT, VIDEO_18)
    heavy.JOBS.update(rollout_2=(ROLLOUT,), rollout_20=(ROLLOUT,), video_18=(VIDEO_18,))
    heavy.HEAVY_TIMED |= {"rollout_2", "rollout_20", "video_18"}
    heavy.ATTACKS.update(ATTACKS)
    bench_abuse.COMPUTING.update(ATTACKS)  # the loop's table of computing attacks, built when it was imported
    bench_abuse.ATTACKS[:] = [*bench_abuse.ATTACKS, *ATTACKS]


def views_table(rows: list, guard: str, settle: float) -> str:
    """The README's table of this bench's attacks (`bench_abuse.attacks_table` of its rows)."""
    return bench_abuse.attacks_table([r for r in rows if r.name in ATTACKS], guard, settle, heavy=True)


def main() -> None:
    register()
    if not any(a.startswith("--only") for a in sys.argv[1:]):
        sys.argv[1:1] = ["--only", ",".join(ATTACKS)]
    settle = float(sys.argv[sys.argv.index("--settle") + 1]) if "--settle" in sys.argv else 15.0
    guard = "OFF" if os.environ.get("ATTENTION_GUARD", "1") in {"0", "false", "no", "off"} else "on"
    rows = bench_abuse.main()
    for name, ok in EXTRA:
        print(f"{bench_abuse.verdict(ok)}  {name}")
    print(readme_block("bench_abuse_views", "heavy", views_table(rows, guard, settle)))


if __name__ == "__main__":
    main()
