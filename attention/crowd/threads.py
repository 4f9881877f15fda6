"""The CPU share of heavy jobs (relevance, text relevance, a video) against the light lane's forwards.

`torch_threads`: torch's intra-op threads of one thread, for a while: a heavy job computed on the CPU with
ATTENTION_HEAVY_THREADS of them (0, the default: as torch has them). `torch.set_num_threads` called in a thread
applies to that thread only; the previous value comes back on leaving (Gradio reuses its worker threads).

`NicedThreads`: long-lived threads at a lower CPU priority (a nice value, ATTENTION_HEAVY_NICE) that heavy jobs
are handed to, so that a light forward of another visitor, at nice 0, gets most of the cores while they compete
(Linux's CFS: a nice-10 thread weighs 110 against a nice-0 thread's 1024). A thread's nice is set once, when it
starts and before its first torch call: an unprivileged process cannot lower it again, and torch's CPU backend
(OpenMP, libgomp) makes each calling thread's worker team as clones of it, so the workers share its nice. Where
CUDA is available (the work is the GPU's; a niced launching thread could starve it), or off Linux, a job runs in
the caller's thread, as with nice 0.

    with torch_threads(SETTINGS.heavy_threads):   # in the thread that runs the job's torch work
        relevance(...)
    pool = NicedThreads(10)
    value = pool.call(fn, *args)                  # fn run in a thread at nice 10, its value or its exception here
    future = pool.submit(fn)                      # the same, without waiting
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """This thread's torch intra-op threads set to `n` while inside, the previous value restored after.
    None or 0, or where CUDA is available (the work is the GPU's; its CPU side is left as it is): nothing."""
    if not n:
        yield
        return
    import torch

    if torch.cuda.is_available():
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def thread_nice(tid: int | None = None) -> int:
    """The nice value of thread `tid` of this process (its native id; None: the calling thread), from
    /proc/self/task/<tid>/stat (Linux)."""
    tid = threading.get_native_id() if tid is None else tid
    with open(f"/proc/self/task/{tid}/stat") as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 2 :].split()[16])  # field 19, nice; the name in parentheses may hold spaces


def niced(nice: int) -> int:
    """The nice heavy jobs get here: `nice` (clamped to 0..19), or 0 where CUDA is available or the platform
    cannot set one thread's nice (not Linux)."""
    nice = max(0, min(19, int(nice)))
    if not nice or not hasattr(os, "setpriority") or not os.path.exists("/proc/self/task"):
        return 0
    import torch

    return 0 if torch.cuda.is_available() else nice


class NicedThreads:
    """Threads at nice `nice` (see the module's doc) that run the jobs handed to them: an idle one takes a job,
    else a new one is started for it (a job never waits for another's thread: the jobs handed here are bounded
    by their admission, `attention.crowd.admission.Lane`); a thread is niced once, when it starts, and then
    kept for later jobs, with torch's worker threads it made. Each job runs in a copy of the caller's context
    (contextvars: Gradio's request and progress reach it). nice 0, or where `niced` says 0: a job runs in the
    caller's thread (`call`) or a thread of its own at the caller's nice (`submit`)."""

    def __init__(self, nice: int, name: str = "heavy"):
        self.asked, self.name = nice, name
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue] = []  # the inboxes of threads waiting for a job
        self._pid = os.getpid()  # a forked child has none of the parent's threads
        self.started = 0  # threads started so far
        self._nice: int | None = None

    @property
    def nice(self) -> int:
        """The nice its threads run at: `niced(asked)`, decided at the first use (CUDA known by then)."""
        if self._nice is None:
            self._nice = niced(self.asked)
        return self._nice

    def submit(self, fn: Callable[..., T], *args, **kwargs) -> Future:
        """`fn(*args, **kwargs)` started in a thread of this pool; its Future."""
        fut: Future = Future()
        job = (contextvars.copy_context(), fn, args, kwargs, fut)
        if not self.nice:
            threading.Thread(target=_run, args=job, daemon=True, name=f"{self.name}-job").start()
            return fut
        with self._lock:
            if self._pid != os.getpid():
                self._idle, self._pid = [], os.getpid()
            inbox = self._idle.pop() if self._idle else None
            if inbox is None:
                self.started += 1
                inbox = queue.SimpleQueue()
                name = f"{self.name}-nice{self.nice}-{self.started}"
                threading.Thread(target=self._serve, args=(inbox,), daemon=True, name=name).start()
        inbox.put(job)
        return fut

    def call(self, fn: Callable[..., T], *args, **kwargs) -> T:
        """`fn(*args, **kwargs)` run in a thread of this pool (nice 0: in this one); its value, or its exception
        raised here."""
        if not self.nice:
            return fn(*args, **kwargs)
        return self.submit(fn, *args, **kwargs).result()

    def _serve(self, inbox: queue.SimpleQueue) -> None:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)  # once, before any torch call here
        while True:
            _run(*inbox.get())
            with self._lock:
                self._idle.append(inbox)


def _run(ctx: contextvars.Context, fn: Callable, args: tuple, kwargs: dict, fut: Future) -> None:
    if not fut.set_running_or_notify_cancel():
        return
    try:
        value = ctx.run(fn, *args, **kwargs)
    except BaseException as e:  # raised again where the caller waits
        fut.set_exception(e)
    else:
        fut.set_result(value)
