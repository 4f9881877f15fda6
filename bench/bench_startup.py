"""Cold start: `python app.py` until it answers HTTP 200, divided by `python -c "import gradio, torch,
timm"` (the floor: what any such app imports), measured alternately in one run.

    python bench/bench_startup.py [--repeats 3]

Offline (HF_HUB_OFFLINE=1, an empty HF_HOME): the first screen is mnist_vit on a digit.
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


def env(port: int) -> dict:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": tempfile.mkdtemp(prefix="bench-startup-hf-"),
        "GRADIO_SERVER_PORT": str(port),
        "GRADIO_EXAMPLES_CACHE": tempfile.mkdtemp(prefix="bench-startup-ex-"),
    }


def imports_seconds() -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import gradio, torch, timm"], check=True, env=env(0))
    return time.perf_counter() - t


def app_seconds(port: int) -> float:
    t = time.perf_counter()
    srv = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env(port), stdout=subprocess.DEVNULL)
    try:
        while True:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).status == 200:
                    return time.perf_counter() - t
            except OSError:
                if srv.poll() is not None:
                    raise SystemExit("the app exited") from None
                time.sleep(0.05)
    finally:
        srv.terminate()
        srv.wait()


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
