"""What one visitor's flood of passes does to the server's memory and to another visitor's pass.

    python bench/bench_state.py                    # 60 passes at 256 px through mnist_vit: two budgets
    python bench/bench_state.py --passes 20 --resolution 512

In a fresh process per setting (environment read at import, as the app does): visitor B keeps one
pass of an upload; visitor A then sends `--passes` different uploads at `--resolution`. Printed:
the counted size of one pass, the store's bytes, RSS before A (model loaded, one pass done: the
baseline), at peak and after, the growth against the store budget ATTENTION_STATE_MB, A's share
against ATTENTION_STATE_VISITOR_MB, and whether B's pass is still kept. Two settings: a visitor
share below the budget (as the app's defaults, 256 of 1024 MB), and a share as large as the budget
(A alone could fill the store: the budget itself bounds RSS, and B keeps their pass).
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

    from attention.vit import session

    rng = np.random.default_rng(0)

    def upload(i: int) -> np.ndarray:
        return (rng.random((resolution, resolution, 3)) * 255).astype("uint8") + np.uint8(i % 7)

    session.get_pass(upload(-1), "mnist_vit", resolution)  # warm-up: the model and one pass's transients
    gc.collect()
    before = _status_mb("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to now
    b = session.get_pass(upload(-2), "mnist_vit", resolution, cache=session.PASSES, visitor="B")
    for i in range(passes):
        session.get_pass(upload(i), "mnist_vit", resolution, cache=session.PASSES, visitor="A")
    gc.collect()
    out = {
        "pass_mb": b.nbytes / 2**20,
        "store_mb": session.PASSES.nbytes / 2**20,
        "a_mb": session.PASSES.owned("A") / 2**20,
        "before_mb": before,
        "peak_mb": _status_mb("VmHWM"),
        "after_mb": _status_mb("VmRSS"),
        "b_kept": session.PASSES.get(b.key) is b,
    }
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passes", type=int, default=60)
    ap.add_argument("--resolution", type=int, default=256)
    ap.add_argument("--state-mb", type=float, default=256, help="ATTENTION_STATE_MB of both runs")
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
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
