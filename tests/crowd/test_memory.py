"""Spec of attention.crowd.memory: freed memory goes back to the system, the number of malloc arenas is bounded,
and the janitor runs its chores on a clock, surviving a chore's failure."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from attention.crowd.memory import Janitor, at_most_every, release

ROOT = Path(__file__).resolve().parents[2]


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim: Linux only")
def test_freed_memory_in_the_middle_of_the_heap_goes_back_to_the_system():
    chunks = [np.ones(8192) for _ in range(3200)]  # 64 kB each (under glibc's mmap threshold): 200 MB of heap
    last = chunks[-1]  # kept: the heap's top stays in use, so glibc's own trimming at free cannot return the rest
    del chunks
    held = _rss_mb()
    assert release()
    assert held - _rss_mb() > 100, (held, _rss_mb())
    assert last.sum() == 8192


def test_the_janitor_runs_its_chores_on_its_clock_and_outlives_a_failing_one(caplog):
    ran = threading.Event()
    calls = []

    def chore():
        calls.append(time.monotonic())
        if len(calls) >= 3:
            ran.set()

    def broken():
        raise RuntimeError("a chore's fault")

    janitor = Janitor(0.05, [broken, chore])
    with caplog.at_level(logging.ERROR, logger="attention.crowd.memory"):
        assert janitor.start() is janitor.start()  # idempotent: one thread
        assert ran.wait(10)
        janitor.stop()
    assert janitor.rounds >= 3 and len(calls) == janitor.rounds
    assert "a chore's fault" in caplog.text
    assert len([t for t in threading.enumerate() if t.name == "memory-janitor"]) == 0


ARENAS = """
import ctypes, ctypes.util, sys, threading
import numpy as np
from attention.crowd.memory import limit_arenas
if sys.argv[1] != "0":
    assert limit_arenas(int(sys.argv[1]))
barrier = threading.Barrier(8)
def work():
    barrier.wait()  # all at once: each thread wants an arena of its own
    for _ in range(200):
        np.ones(4096).sum()
threads = [threading.Thread(target=work) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
ctypes.CDLL(ctypes.util.find_library("c")).malloc_stats()  # to stderr: one "Arena i:" per arena
"""


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_limiting_arenas_bounds_how_many_eight_busy_threads_make():
    def arenas(limit: int) -> int:
        out = subprocess.run([sys.executable, "-c", ARENAS, str(limit)], capture_output=True, text=True, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        return out.stderr.count("Arena ")

    assert arenas(2) <= 2 < arenas(0)


MMAP = """
import ctypes, ctypes.util, sys
import numpy as np
from attention.crowd.memory import fix_mmap_threshold
libc = ctypes.CDLL(ctypes.util.find_library("c"))
NAMES = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in NAMES.split()]
libc.mallinfo2.restype = Info
if sys.argv[1] != "0":
    assert fix_mmap_threshold(int(sys.argv[1]))
first = np.empty(4 << 20, np.uint8)  # 4 MB: over glibc's first threshold (128 KB), so mapped
del first  # freed: glibc (left alone) raises its threshold to this block's size
mapped = libc.mallinfo2().hblkhd
second = np.empty(4 << 20, np.uint8)
print(libc.mallinfo2().hblkhd - mapped)  # bytes the second block added to the mapped blocks
"""


@pytest.mark.subprocess
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_a_fixed_mmap_threshold_keeps_each_large_block_in_a_mapping_of_its_own():
    """Left alone, glibc serves a large block from the arena once a block that size was freed (its threshold
    moved up); fixed at 1 MB, every block of 1 MB or more stays a mapping, returned to the system when freed."""

    def mapped_by_second(threshold: int) -> int:
        out = subprocess.run([sys.executable, "-c", MMAP, str(threshold)], capture_output=True, text=True, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        return int(out.stdout)

    assert mapped_by_second(0) == 0  # glibc's moving threshold: from the arena
    assert mapped_by_second(1 << 20) >= 4 << 20


def test_a_slower_chore_runs_at_most_once_in_its_period():
    """`at_most_every`: the first call runs the chore, calls within the period do not, the next one does."""
    now, runs = [0.0], []
    chore = at_most_every(300.0, lambda: runs.append(now[0]), clock=lambda: now[0])
    for t in (0.0, 10.0, 299.0, 300.0, 310.0, 601.0):
        now[0] = t
        chore()
    assert runs == [0.0, 300.0, 601.0]


class Holder:
    """A job's frame as a traceback keeps it: an object in a reference cycle, holding a large array."""

    def __init__(self):
        self.maps = np.ones(1 << 22)  # 32 MB
        self.me = self


@pytest.mark.parametrize("collect", [True, False])
def test_the_janitor_collects_cyclic_garbage_that_holds_a_jobs_arrays(collect):
    import gc
    import weakref

    gc.disable()  # no collection of its own meanwhile, as on a quiet server
    try:
        held = weakref.ref(Holder())  # the cycle is garbage at once; only a collection frees it
        assert held() is not None
        Janitor(60.0, [], collect=collect).round()
        assert (held() is None) is collect
    finally:
        gc.enable()
        gc.collect()


@pytest.mark.subprocess
def test_objects_frozen_at_start_are_kept_and_a_collection_skips_them():
    script = """
import gc, weakref
from attention.crowd.memory import freeze_startup
from tests.crowd.test_memory import Holder
kept = [[i] for i in range(300_000)]  # what the app built
assert len(gc.get_objects()) > 300_000  # each full collection walks them
assert freeze_startup() > 300_000
assert len(gc.get_objects()) < 50_000  # frozen: no longer walked
held = weakref.ref(Holder())  # garbage made while serving is still collected
gc.collect()
assert held() is None and len(kept) == 300_000 and kept[-1] == [299_999]
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
