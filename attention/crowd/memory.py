"""Memory the process freed, given back to the operating system, and the chores that free it on a clock.

glibc's allocator keeps what Python, numpy and torch free in its arenas (one per thread that allocated,
up to 8 per core) for reuse, and returns to the system only a free stretch at the top of an arena. A
server whose worker threads answered a flood of small requests, or dropped a visitor's large arrays,
then holds that memory for good though nothing uses it. `release()` asks glibc to hand back every
free page of every arena (`malloc_trim(0)`: it unmaps whole free pages, moves nothing); elsewhere
(macOS, musl, Windows) it does nothing.

Trimming cannot undo fragmentation, and arenas multiply it: a job that runs in whichever of the
server's 40 worker threads is free (busy ones during a flood) leaves its working memory's free
pieces in that thread's arena, so each of up to 16 arenas (2 cores) ends up holding about one job's
working set. `limit_arenas(n)` caps their number (glibc's M_ARENA_MAX, what MALLOC_ARENA_MAX sets),
for threads started afterwards: the memory kept is then about n working sets, whatever the crowd.

Large blocks are the other half. glibc serves a block of at least its mmap threshold from a mapping of its
own, returned to the system the moment it is freed; but each time such a block is freed it raises the
threshold to that block's size (up to 32 MB), so after a job's first large free its frames, maps and
batches (1-30 MB each) come from the arenas, between the small objects other requests leave there
meanwhile, and what those keep alive holds the pages around them. `fix_mmap_threshold(n)` sets the
threshold once (glibc's M_MMAP_THRESHOLD, which also stops it moving): every block of n bytes or more
is its own mapping, given back when freed, whatever else the arena holds.

Some freed memory waits for Python's cycle collector first: an exception's traceback holds the frames
it passed through, with their locals (a job's frames and maps), in a cycle that reference counting cannot
free, and a quiet server makes too few new objects for a full collection to come. The janitor collects
each round; `freeze_startup()` (once the app is built) takes what serving needs for good (the models,
the app, Gradio's tables: 0.8 million objects) out of the collector's walk, so a collection costs about
10 ms here instead of 0.5 s.

    limit_arenas(2)                                         # before the server starts its threads
    fix_mmap_threshold(1 << 20)                             # blocks of 1 MB or more: mapped, unmapped when freed
    janitor = Janitor(every=10.0, chores=[PASSES.sweep, at_most_every(300.0, slow_chore)], collect=True)
    janitor.start()                                         # a daemon thread: chores, gc.collect(), release()
    freeze_startup()                                        # the app built: its objects out of the collector's walk
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


M_ARENA_MAX = -8  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3


@functools.cache
def _libc_function(name: str) -> Callable[..., int] | None:
    """A function of glibc (`malloc_trim`, `mallopt`), or None where the C library has none."""
    lib = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(lib), name) if lib else None
    except (OSError, AttributeError):
        return None


def limit_arenas(n: int) -> bool:
    """At most `n` malloc arenas for the threads started from now on (glibc `mallopt(M_ARENA_MAX, n)`);
    True if it could (False elsewhere, or if glibc refused)."""
    mallopt = _libc_function("mallopt")
    return mallopt is not None and mallopt(M_ARENA_MAX, int(n)) == 1


def fix_mmap_threshold(nbytes: int) -> bool:
    """Blocks of `nbytes` (at most 32 MB, glibc's ceiling on 64-bit systems) or more each in their own mapping,
    returned to the system when freed, from now on, and the threshold no longer raised by glibc
    (`mallopt(M_MMAP_THRESHOLD, n)`); True if it could (False elsewhere, or if glibc refused)."""
    mallopt = _libc_function("mallopt")
    return mallopt is not None and mallopt(M_MMAP_THRESHOLD, int(nbytes)) == 1


def release() -> bool:
    """Give the allocator's free pages back to the system (glibc `malloc_trim(0)`); True if it could."""
    trim = _libc_function("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True


def freeze_startup() -> int:
    """Collect, then move every object alive now to the collector's permanent generation (`gc.freeze`): they are
    freed as before when nothing refers to them, but never walked again. Call it once what the process keeps
    for good is built, before it serves. Returns how many objects it froze."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def at_most_every(
    seconds: float, chore: Callable[[], object] | None = None, clock: Callable[[], float] = time.monotonic
) -> Callable[[], bool]:
    """The package's one periodic throttle: a callable that runs `chore` at most once every `seconds`
    (the first call runs it; calls in between do nothing) and says whether it was due. A slower chore
    on a janitor's faster clock, a folder swept at most once a minute (`cache.sweep`), a folder measured
    at most every 10 s (`limits.FolderBudget`: no chore, the gate alone). Thread-safe: of callers at the
    same moment one is due, the others go on at once."""
    last: list[float] = []
    lock = threading.Lock()

    def throttled() -> bool:
        now = clock()
        with lock:
            if last and now - last[0] < seconds:
                return False
            last[:] = [now]
        if chore is not None:
            chore()
        return True

    return throttled


class Janitor:
    """A daemon thread that every `every` seconds runs each of `chores` (an exception is logged, not
    raised), then (`collect`) a full collection of cyclic garbage, then `release()`. `start` is idempotent;
    `stop` ends it (tests)."""

    def __init__(self, every: float, chores: list[Callable[[], object]], collect: bool = False):
        self.every, self.chores, self.rounds, self.collect = float(every), list(chores), 0, collect
        self._stop, self._thread = threading.Event(), None
        self._lock = threading.Lock()

    def start(self) -> Janitor:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(target=self._run, name="memory-janitor", daemon=True)
                self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def round(self) -> None:
        """The chores once, then the collection (`collect`), then `release()`."""
        for chore in self.chores:
            try:
                chore()
            except Exception:  # noqa: BLE001 - a chore's fault must not end the janitor
                log.exception("memory chore %r failed", chore)
        if self.collect:
            gc.collect()
        release()
        self.rounds += 1

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.round()
