"""Cold start: `python app.py` until it answers HTTP 200, divided by `python -c "import gradio, torch,
timm"` (the floor: what any such app imports), measured alternately in one run.

    python -m bench.bench_startup [--repeats 3]

Offline (HF_HUB_OFFLINE=1, an empty HF_HOME): the first screen is mnist_vit on a digit.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from bench.common import app_env, start_app


def imports_seconds() -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import gradio, torch, timm"], check=True, env=app_env("bench-startup"))
    return time.perf_counter() - t


def app_seconds(port: int) -> float:
    env = app_env("bench-startup")  # made before the clock starts
    t = time.perf_counter()
    with start_app(env, port, poll=0.05):
        return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--port", type=int, default=7893)
    args = ap.parse_args()
    imports_seconds()  # warm the disk cache once
    apps, imps = [], []
    for _ in range(args.repeats):
        imps.append(imports_seconds())
        apps.append(app_seconds(args.port))
    a, i = statistics.median(apps), statistics.median(imps)
    print(f"python app.py until HTTP 200: {a:.2f} s (median of {args.repeats}: {', '.join(f'{x:.2f}' for x in apps)})")
    print(f"import gradio, torch, timm:    {i:.2f} s (median of {args.repeats}: {', '.join(f'{x:.2f}' for x in imps)})")
    print(f"ratio: {a / i:.2f}")


if __name__ == "__main__":
    main()
