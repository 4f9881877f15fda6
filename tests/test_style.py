"""The code keeps one style: ruff's lint rules and formatter (config in pyproject.toml) pass on the tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args, "."], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.subprocess
def test_ruff_lint_passes():
    r = _ruff("check", "--output-format", "concise")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.subprocess
def test_ruff_format_is_applied():
    r = _ruff("format", "--check")
    assert r.returncode == 0, r.stdout + r.stderr
