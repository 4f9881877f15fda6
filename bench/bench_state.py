"""What one visitor's flood of passes does to the server's memory and to another visitor's pass.

    python -m bench.bench_state                    # 60 passes at 256 px through mnist_vit: two budgets
    python -m bench.bench_state --passes 20 --resolution 512
    python -m bench.bench_state --queue                 # the queue: another visitor's wait during a flood

In a fresh process per setting (environment read at import, as the app does): visitor B keeps one
pass of an upload; visitor A then sends `--passes` different uploads at `--resolution`. Printed:
the counted size of one pass, the store's bytes, RSS before A (model loaded, one pass done: the
baseline), at peak and after, the growth against the store budget ATTENTION_STATE_MB, A's share
against ATTENTION_STATE_VISITOR_MB, and whether B's pass is still kept. Two settings: a visitor
share below the budget (as the app's defaults, 256 of 1024 MB), and a share as large as the budget
(A alone could fill the store: the budget itself bounds RSS, and B keeps their pass). Ends with
the two runs as a Markdown block for the docs (bench/blocks.py).

--queue: the app in this process; visitor B's small request (an example's maps) timed alone, then
while visitor A sends `--heavy` uploads at 512 px at once: how many of A's were queued or refused
(ATTENTION_VISITOR_JOBS) and B's wait.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from bench.common import DIGITS, answers, in_fresh_process, markdown_table, readme_block, reset_peak, rss_mb, status_mb


def child(passes: int, resolution: int) -> None:
    import gc

    import numpy as np

    from attention.vit import passes as store

    rng = np.random.default_rng(0)

    def upload(i: int) -> np.ndarray:
        return (rng.random((resolution, resolution, 3)) * 255).astype("uint8") + np.uint8(i % 7)

    store.get_pass(upload(-1), "mnist_vit", resolution)  # warm-up: the model and one pass's transients
    before = reset_peak()
    b = store.get_pass(upload(-2), "mnist_vit", resolution, cache=store.PASSES, visitor="B")
    for i in range(passes):
        store.get_pass(upload(i), "mnist_vit", resolution, cache=store.PASSES, visitor="A")
    gc.collect()
    out = {
        "pass_mb": b.nbytes / 2**20,
        "store_mb": store.PASSES.nbytes / 2**20,
        "a_mb": store.PASSES.owned("A") / 2**20,
        "before_mb": before,
        "peak_mb": status_mb("VmHWM"),
        "after_mb": rss_mb(),
        "b_kept": store.PASSES.get(b.key) is b,
    }
    print(json.dumps(out))


def queue(heavy: int) -> None:
    import statistics
    import time

    import numpy as np
    from gradio_client import Client, handle_file
    from PIL import Image

    import app
    from attention.config import SETTINGS

    _, url, _ = app.demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **app.LAUNCH)
    if not answers(url + "gradio_api/info", poll=0.3):
        raise SystemExit(f"the app did not answer at {url}")
    digit = str(DIGITS[3])
    b = Client(url, verbose=False)

    def small() -> float:
        t0 = time.perf_counter()
        b.predict(handle_file(digit), "mnist_vit", api_name="/attention_maps")
        return time.perf_counter() - t0

    small()  # B's example pass kept
    quiet = statistics.median(small() for _ in range(5))
    tmp = Path(tempfile.mkdtemp(prefix="bench-state-uploads-"))
    pictures = []
    for i in range(heavy):
        pictures.append(tmp / f"{i}.png")
        Image.fromarray((np.random.default_rng(i).random((512, 512, 3)) * 255).astype("uint8")).save(pictures[-1])
    a = Client(url, verbose=False)
    t0 = time.perf_counter()
    jobs = [a.submit(handle_file(str(p)), "mnist_vit", -1, "512", api_name="/attention_maps") for p in pictures]
    time.sleep(0.5)  # A's jobs have joined
    during = small()
    done = refused = 0
    for j in jobs:
        try:
            j.result()
            done += 1
        except Exception:  # noqa: BLE001 - gradio_client's ValidationError: refused at the door
            refused += 1
    print(
        f"ATTENTION_VISITOR_JOBS={SETTINGS.visitor_jobs}, ATTENTION_CONCURRENCY={SETTINGS.concurrency}: "
        f"B's request alone {quiet:.3f} s; during A's {heavy} heavy uploads at once {during:.3f} s "
        f"({during / quiet:.0f}x); A: {done} computed, {refused} refused, all in {time.perf_counter() - t0:.1f} s"
    )
    app.demo.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passes", type=int, default=60)
    ap.add_argument("--resolution", type=int, default=256)
    ap.add_argument("--state-mb", type=float, default=256, help="ATTENTION_STATE_MB of both runs")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--queue", action="store_true")
    ap.add_argument("--heavy", type=int, default=6)
    args = ap.parse_args()
    if args.queue:
        os.environ["HF_HUB_OFFLINE"] = "1"
        queue(args.heavy)
        return
    if args.child:
        child(args.passes, args.resolution)
        return
    print(f"visitor A: {args.passes} uploads at {args.resolution} px through mnist_vit")
    runs = []
    for visitor_mb in (args.state_mb / 4, args.state_mb):
        env = {
            **os.environ,
            "ATTENTION_STATE_MB": str(args.state_mb),
            "ATTENTION_STATE_VISITOR_MB": str(visitor_mb),
            "HF_HUB_OFFLINE": "1",
        }
        child_args = ["--child", "--passes", str(args.passes), "--resolution", str(args.resolution)]
        r = in_fresh_process(__spec__.name, child_args, env, unmap=False)
        grow_peak, grow_after = r["peak_mb"] - r["before_mb"], r["after_mb"] - r["before_mb"]
        print(
            f"STATE_MB {args.state_mb:g}, VISITOR_MB {visitor_mb:g}: one pass {r['pass_mb']:.1f} MB counted; "
            f"store {r['store_mb']:.0f} MB (A {r['a_mb']:.0f} MB); RSS {r['before_mb']:.0f} -> peak "
            f"{r['peak_mb']:.0f} -> {r['after_mb']:.0f} MB: growth {grow_after:.0f} MB = "
            f"{grow_after / args.state_mb:.2f}x the budget (peak {grow_peak / args.state_mb:.2f}x); "
            f"B's pass kept: {r['b_kept']}"
        )
        runs.append((args.state_mb, visitor_mb, r))
    print(readme_block("bench_state", "flood", flood_table(runs)))


def flood_table(runs: list[tuple[float, float, dict]]) -> str:
    """(ATTENTION_STATE_MB, ATTENTION_STATE_VISITOR_MB, a child's measurements) per run, as a Markdown table."""
    header = [
        "STATE_MB",
        "VISITOR_MB",
        "one pass, counted",
        "store (A's)",
        "RSS before, peak, after",
        "growth / budget",
        "B's pass kept",
    ]
    rows = [
        (
            f"{budget:g}",
            f"{share:g}",
            f"{r['pass_mb']:.1f} MB",
            f"{r['store_mb']:.0f} MB ({r['a_mb']:.0f} MB)",
            f"{r['before_mb']:.0f}, {r['peak_mb']:.0f}, {r['after_mb']:.0f} MB",
            f"{(r['after_mb'] - r['before_mb']) / budget:.2f}x (peak {(r['peak_mb'] - r['before_mb']) / budget:.2f}x)",
            "yes" if r["b_kept"] else "NO",
        )
        for budget, share, r in runs
    ]
    return markdown_table(header, rows)


if __name__ == "__main__":
    main()
