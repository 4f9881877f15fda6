"""What one visitor's flood of passes does to the server's memory and to another visitor's pass.

    python bench/bench_state.py                    # 60 passes at 256 px through mnist_vit: two budgets
    python bench/bench_state.py --passes 20 --resolution 512
    python bench/bench_state.py --queue                 # the queue: another visitor's wait during a flood

In a fresh process per setting (environment read at import, as the app does): visitor B keeps one
pass of an upload; visitor A then sends `--passes` different uploads at `--resolution`. Printed:
the counted size of one pass, the store's bytes, RSS before A (model loaded, one pass done: the
baseline), at peak and after, the growth against the store budget ATTENTION_STATE_MB, A's share
against ATTENTION_STATE_VISITOR_MB, and whether B's pass is still kept. Two settings: a visitor
share below the budget (as the app's defaults, 256 of 1024 MB), and a share as large as the budget
(A alone could fill the store: the budget itself bounds RSS, and B keeps their pass).

--queue: the app in this process; visitor B's small request (an example's maps) timed alone, then
while visitor A sends `--heavy` uploads at 512 px at once: how many of A's were queued or refused
(ATTENTION_VISITOR_JOBS) and B's wait.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def child(passes: int, resolution: int) -> None:
    import gc

    import numpy as np

    from attention.vit import passes

    rng = np.random.default_rng(0)

    def upload(i: int) -> np.ndarray:
        return (rng.random((resolution, resolution, 3)) * 255).astype("uint8") + np.uint8(i % 7)

    passes.get_pass(upload(-1), "mnist_vit", resolution)  # warm-up: the model and one pass's transients
    gc.collect()
    before = _status_mb("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to now
    b = passes.get_pass(upload(-2), "mnist_vit", resolution, cache=passes.PASSES, visitor="B")
    for i in range(passes):
        passes.get_pass(upload(i), "mnist_vit", resolution, cache=passes.PASSES, visitor="A")
    gc.collect()
    out = {
        "pass_mb": b.nbytes / 2**20,
        "store_mb": passes.PASSES.nbytes / 2**20,
        "a_mb": passes.PASSES.owned("A") / 2**20,
        "before_mb": before,
        "peak_mb": _status_mb("VmHWM"),
        "after_mb": _status_mb("VmRSS"),
        "b_kept": passes.PASSES.get(b.key) is b,
    }
    print(json.dumps(out))


def queue(heavy: int) -> None:
    import statistics
    import time
    import urllib.request

    import numpy as np
    from gradio_client import Client, handle_file
    from PIL import Image

    import app
    from attention.config import SETTINGS

    _, url, _ = app.demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **app.LAUNCH)
    while True:
        try:
            urllib.request.urlopen(url + "gradio_api/info", timeout=5).read()
            break
        except OSError:
            time.sleep(0.3)
    digit = str(ROOT / "examples" / "digits" / "digit_3.png")
    b = Client(url, verbose=False)

    def small() -> float:
        t0 = time.perf_counter()
        b.predict(handle_file(digit), "mnist_vit", api_name="/attention_maps")
        return time.perf_counter() - t0

    small()  # B's example pass kept
    quiet = statistics.median(small() for _ in range(5))
    tmp = Path("/tmp/bench_state_uploads")
    tmp.mkdir(exist_ok=True)
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
    for visitor_mb in (args.state_mb / 4, args.state_mb):
        env = {
            **os.environ,
            "ATTENTION_STATE_MB": str(args.state_mb),
            "ATTENTION_STATE_VISITOR_MB": str(visitor_mb),
            "HF_HUB_OFFLINE": "1",
        }
        cmd = [sys.executable, __file__, "--child", "--passes", str(args.passes), "--resolution", str(args.resolution)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        grow_peak, grow_after = r["peak_mb"] - r["before_mb"], r["after_mb"] - r["before_mb"]
        print(
            f"STATE_MB {args.state_mb:g}, VISITOR_MB {visitor_mb:g}: one pass {r['pass_mb']:.1f} MB counted; "
            f"store {r['store_mb']:.0f} MB (A {r['a_mb']:.0f} MB); RSS {r['before_mb']:.0f} -> peak "
            f"{r['peak_mb']:.0f} -> {r['after_mb']:.0f} MB: growth {grow_after:.0f} MB = "
            f"{grow_after / args.state_mb:.2f}x the budget (peak {grow_peak / args.state_mb:.2f}x); "
            f"B's pass kept: {r['b_kept']}"
        )


if __name__ == "__main__":
    main()
