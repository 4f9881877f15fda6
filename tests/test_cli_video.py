"""`python -m attention video`: an MP4 (and the .npz on request) from a video, DINO's option names;
a file that is not a video is one clear line and exit status 2."""

from __future__ import annotations

import subprocess
import sys

import av
import numpy as np
import pytest

from attention.__main__ import main
from tests.video_clips import ROOT, moving_digit


def test_video_writes_the_mp4_and_npz(tmp_path, capsys):
    moving_digit(tmp_path / "in.mp4", n=10, fps=10)
    argv = ["video", str(tmp_path / "in.mp4"), "--model", "mnist_vit", "--resize", "native", "--fps", "5"]
    argv += ["--threshold", "0.5", "--out", str(tmp_path / "o.mp4"), "--npz", str(tmp_path / "m.npz")]
    assert main(argv + ["--view", "fig3", "--side-by-side"]) == 0
    assert "5 frames, 896x224 px at 5 fps" in capsys.readouterr().out
    with av.open(str(tmp_path / "o.mp4")) as c:
        assert c.streams.video[0].average_rate == 5
        assert sum(1 for _ in c.decode(video=0)) == 5
    d = np.load(tmp_path / "m.npz")
    assert d["maps"].shape == (5, 4, 14, 28) and float(d["threshold"]) == 0.5


@pytest.mark.slow
@pytest.mark.subprocess
def test_not_a_video_is_one_clear_line(tmp_path):
    (tmp_path / "x.mp4").write_text("not a video")
    r = subprocess.run(
        [sys.executable, "-m", "attention", "video", str(tmp_path / "x.mp4"), "--model", "mnist_vit"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 2
    accepted = "accepted: MP4, WebM, MOV, MKV, AVI or GIF files with a video stream."
    assert r.stderr.strip() == f"error: x.mp4 is not a video FFmpeg can read; {accepted}"
