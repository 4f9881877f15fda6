"""The Video tab's cost estimate against the measured time, on this machine (goal: within 2x).

    python -m bench.bench_video_estimate

Three clips and settings through mnist_vit (the model that ships with the app, so this runs offline):
the digit clip at 56 px, the cat clip at "auto", and the cat clip's first second at its native size
(a 90x120 grid: the run that took 53 s unannounced in issue 37). For each: the estimate the tab shows
(`attention.vit.engine.video_estimate.estimate`, this machine's speed measured once per model, included in
the first row's estimate time) and the measured seconds of the same run (`video.write_video`, side by
side, as the tab makes it), and their ratio. The machine's load average is printed: on a shared CPU
the measured time moves with the neighbours' work, the estimate's calibration with it.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.common import ROOT, load_average, markdown_table

CASES = [  # (clip, resolution, seconds: None = all of it)
    ("digits.mp4", "56", None),
    ("chelsea.mp4", "auto", None),
    ("chelsea.mp4", "native", 1.0),
]


def main() -> None:
    from attention.vit.engine import video_estimate
    from attention.vit.engine.video import attention_video, write_video
    from attention.vit.models.loader import load_vit

    model = load_vit("mnist_vit")
    t0 = time.perf_counter()
    speed = video_estimate.measured_speed(model)
    calibration = time.perf_counter() - t0
    rows = []
    for clip, res, seconds in CASES:
        path = ROOT / "examples" / "videos" / clip
        est = video_estimate.estimate(model, path, resolution=res, seconds=seconds, layer=2, side_by_side=True)
        run = attention_video(model, path, resolution=res, seconds=seconds, layer=2)
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            write_video(run, Path(d) / "out.mp4", view="mean", side_by_side=True)
            measured = time.perf_counter() - t
        ratio = max(est.seconds, measured) / max(1e-9, min(est.seconds, measured))
        within = "yes" if ratio <= 2 else "no"
        what = f"{clip} at {res}" + (f", first {seconds:g} s" if seconds else "")
        rows.append((what, est.frames, f"{est.grid[0]}x{est.grid[1]}", f"{est.gflop:,.1f}", f"{est.seconds:.2f}"))
        rows[-1] += (f"{measured:.2f}", f"{ratio:.2f}", within)
    print(f"calibration: {calibration:.2f} s, {speed}; load average {load_average()}")
    header = ["clip and setting", "frames", "grid", "GFLOP", "estimate s", "measured s", "ratio", "within 2x"]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
