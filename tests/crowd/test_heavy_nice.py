"""Spec of the heavy lane's CPU priority (attention.crowd.threads.NicedThreads, Lane.call): a heavy job computes
in a thread at the lane's nice, and so do the torch (OpenMP) worker threads it makes, while the light lane's
threads (a forward in another thread) and their workers stay at 0; nice 0 leaves everything as before (the job
in the caller's thread). Each thread's nice is read from /proc/self/task/<tid>/stat (Linux)."""

from __future__ import annotations

import contextvars
import os
import threading

import pytest

from attention.crowd.admission import Lane
from attention.crowd.threads import NicedThreads, thread_nice
from attention.crowd.visitors import Visitor

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads each thread's nice from Linux's /proc"),
    pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA the heavy work is the GPU's: no nice"),
]

A = Visitor("a", "10.0.0.1")
X = torch.randn(600, 600)
ASKED: contextvars.ContextVar[str] = contextvars.ContextVar("asked", default="")


def _tasks() -> dict[int, int]:
    """{native thread id: nice} of every thread of this process now."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            out[int(tid)] = thread_nice(int(tid))
        except OSError:  # the thread ended meanwhile
            pass
    return out


def _matmuls(n: int = 5) -> None:
    for _ in range(n):
        X @ X  # MKL's / torch's OpenMP team of the calling thread


def test_a_heavy_job_and_its_torch_workers_run_at_the_lanes_nice_and_a_light_forward_does_not():
    torch.set_num_threads(2)  # at least one OpenMP worker beside each calling thread
    _matmuls()  # the light side's (this thread's) team exists before the job: at 0
    before = _tasks()
    lane = Lane("heavy", nice=7)
    inside, light_done = threading.Event(), threading.Event()

    def job() -> tuple[int, dict[int, int]]:
        with lane.turn(A):
            torch.set_num_threads(2)
            _matmuls()
            inside.set()
            light_done.wait(10)  # a light forward in the caller's thread meanwhile
            _matmuls()
            return threading.get_native_id(), _tasks()

    fut = lane.pool.submit(job)
    assert inside.wait(30)
    _matmuls()  # the light forward, while the heavy job holds its thread and workers
    # the light side: this thread and the threads that were at 0 before (other tests' niced pool threads may live)
    light = {tid: nice for tid, nice in _tasks().items() if before.get(tid) == 0}
    light_done.set()
    tid, during = fut.result(30)
    made = {t: nice for t, nice in during.items() if t not in before}  # the job's thread and its workers
    assert tid in made and len(made) >= 2, made  # its OpenMP worker beside it
    assert set(made.values()) == {7}, made
    assert threading.get_native_id() in light and set(light.values()) == {0}, light
    assert thread_nice() == 0
    assert lane.pool.call(lambda: (threading.get_native_id(), thread_nice())) == (tid, 7)  # kept, and reused


def test_nice_zero_leaves_the_job_in_the_callers_thread_at_its_nice():
    lane = Lane("heavy", nice=0)
    assert lane.pool.nice == 0
    assert lane.call(lambda: (threading.get_ident(), thread_nice())) == (threading.get_ident(), 0)
    assert lane.pool.started == 0  # no thread of its own


def test_a_job_gets_the_callers_context_its_value_and_its_exception():
    """Gradio's request and progress are contextvars: the niced thread sees the caller's; its answer and its
    error come back to the caller as they are."""
    pool = NicedThreads(5)
    ASKED.set("visitor a")
    assert pool.call(lambda x: (ASKED.get(), thread_nice(), x), 3) == ("visitor a", 5, 3)
    with pytest.raises(KeyError, match="missing"):
        pool.call(lambda: {}["missing"])
    assert pool.call(thread_nice) == 5 and pool.started == 1  # one thread, niced once, serves each job in turn


def test_jobs_at_once_each_get_a_thread_so_a_paused_job_never_blocks_the_granted_one():
    """A video pauses inside its thread between chunks, waiting for its turn: the job granted the slot meanwhile
    must not wait for that thread."""
    pool, release = NicedThreads(3), threading.Event()
    first = pool.submit(release.wait, 10)
    assert pool.call(thread_nice) == 3  # while the first still holds its thread
    release.set()
    assert first.result(10) is True and pool.started == 2


def test_the_heavy_lane_uses_the_heavy_nice_setting_and_its_handlers_run_there():
    from attention.config import SETTINGS
    from attention.crowd.admission import HEAVY
    from attention.ui.common.admit import in_lane

    assert HEAVY.pool.asked == SETTINGS.heavy_nice
    lane = Lane("heavy", nice=4)

    def relevance(image, model="mnist_vit"):
        """The doc Gradio shows."""
        return image, model, thread_nice()

    handler = in_lane(relevance, lane)
    assert handler("x.png") == ("x.png", "mnist_vit", 4)
    assert handler.__doc__ == relevance.__doc__ and handler.__wrapped__ is relevance  # Gradio's signature


def test_where_cuda_is_available_no_thread_is_niced(monkeypatch):
    """With CUDA the heavy work is the GPU's: a niced launching thread could only starve it."""
    from attention.crowd.threads import niced

    assert niced(10) == 10 and niced(25) == 19 and niced(0) == 0
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    pool = NicedThreads(10)
    assert niced(10) == 0 and pool.nice == 0
    assert pool.call(lambda: (threading.get_ident(), thread_nice())) == (threading.get_ident(), 0)
