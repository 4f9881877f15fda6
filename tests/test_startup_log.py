"""The app starts with a clean log: no warning (a visitor or an operator reading it sees only what matters)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LAUNCH = """
import app
app.demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **app.LAUNCH)
app.demo.close()
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_launching_the_app_prints_no_warning(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_TEMP_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", LAUNCH], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr and "Warning" not in r.stdout, r.stderr + r.stdout
