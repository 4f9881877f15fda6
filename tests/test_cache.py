"""Spec of attention.cache's folder sweep: Gradio's cache deletion leaves one empty folder per file it
ever served; `sweep_empty_dirs` removes those once they have been empty a while, and nothing else."""

from __future__ import annotations

import os
import time

from attention.cache import sweep_empty_dirs


def _age(path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_old_empty_folders_are_removed_deepest_first(tmp_path):
    for name in ("a", "b/c", "d"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "d" / "kept.png").write_bytes(b"x")
    (tmp_path / "e").mkdir()  # empty, but just emptied: an upload may be about to land there
    for name in ("a", "b/c", "b", "d"):
        _age(tmp_path / name, 120)
    assert sweep_empty_dirs(tmp_path, min_age=60) == 2  # a, b/c (b changed when c went: the next sweep)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "d", "e"]
    assert (tmp_path / "d" / "kept.png").exists()
    _age(tmp_path / "b", 120)
    assert sweep_empty_dirs(tmp_path, min_age=60) == 1 and not (tmp_path / "b").exists()
    assert tmp_path.exists() and (tmp_path / "e").exists()


def test_a_missing_root_is_nothing_to_sweep(tmp_path):
    assert sweep_empty_dirs(tmp_path / "gone") == 0
