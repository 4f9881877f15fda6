"""One bounded store for what the server keeps between requests: least recently used out first,
a total byte budget, a time to live, and one computation per key however many ask at once.

Shared by every visitor, so it is thread-safe. Keys must identify the *content* of what is
computed (e.g. an image digest, a model name and a resolution): two visitors who send the same
input get the same entry, and nobody can reach an entry without sending its input.

    cache = SharedCache(max_bytes=1 << 30, ttl=1800)
    value = cache.get_or_run(key, lambda: compute())   # computed once, even from 8 threads at once

The files the server writes for Gradio to serve are bounded the same way, by age: `sweep`.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from pathlib import Path
from typing import Generic, Protocol, TypeVar


class Sized(Protocol):
    @property
    def nbytes(self) -> int: ...


V = TypeVar("V", bound=Sized)


class SharedCache(Generic[V]):
    """Values with an `nbytes` under `max_bytes` in total, each dropped `ttl` seconds after its
    last use. A value larger than `max_bytes` is returned but not kept."""

    def __init__(self, max_bytes: int, ttl: float, clock: Callable[[], float] = time.monotonic):
        self.max_bytes, self.ttl, self._clock = int(max_bytes), float(ttl), clock
        self._items: OrderedDict[Hashable, tuple[V, int, float]] = OrderedDict()  # key -> (value, bytes, last use)
        self._inflight: dict[Hashable, Future] = {}
        self._lock = threading.Lock()
        self.nbytes = 0
        self.computed = 0  # how many times a value was computed (for tests and benches)

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._items)

    def get(self, key: Hashable) -> V | None:
        """The value of `key` if kept (and fresh), marking it used; else None."""
        with self._lock:
            self._expire()
            if key not in self._items:
                return None
            value, size, _ = self._items.pop(key)
            self._items[key] = (value, size, self._clock())
            return value

    def put(self, key: Hashable, value: V) -> None:
        """Keep `value` under `key`, dropping the least recently used values until it fits."""
        with self._lock:
            self._put(key, value)

    def get_or_run(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The kept value of `key`, else `compute()` run once: callers asking for the same key
        meanwhile wait for that one result (or get its exception)."""
        with self._lock:
            self._expire()
            if key in self._items:
                value, size, _ = self._items.pop(key)
                self._items[key] = (value, size, self._clock())
                return value
            fut = self._inflight.get(key)
            owner = fut is None
            if owner:
                fut = self._inflight[key] = Future()
        if not owner:
            return fut.result()
        try:
            value = compute()
        except BaseException as e:
            with self._lock:
                del self._inflight[key]
            fut.set_exception(e)
            raise
        with self._lock:
            self.computed += 1
            self._put(key, value)
            del self._inflight[key]
        fut.set_result(value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.nbytes = 0

    def _put(self, key: Hashable, value: V) -> None:
        if key in self._items:
            self.nbytes -= self._items.pop(key)[1]
        size = int(value.nbytes)
        if size > self.max_bytes:
            return
        while self._items and self.nbytes + size > self.max_bytes:
            self.nbytes -= self._items.popitem(last=False)[1][1]
        self._items[key] = (value, size, self._clock())
        self.nbytes += size

    def _expire(self) -> None:
        cutoff = self._clock() - self.ttl
        while self._items:
            key, (_, size, used) = next(iter(self._items.items()))
            if used > cutoff:
                break
            del self._items[key]
            self.nbytes -= size


_last_sweep: dict[Path, float] = {}  # root -> when it was last swept
_sweep_lock = threading.Lock()


def sweep(root: Path, max_age: float, every: float = 60.0) -> None:
    """Delete the files and folders directly under `root` last modified over `max_age` seconds ago,
    at most once every `every` seconds per root (one thread sweeps; the others go on at once). What a
    server writes there is then bounded by traffic x age."""
    now = time.time()
    with _sweep_lock:
        if now - _last_sweep.get(root, 0.0) <= every:
            return
        _last_sweep[root] = now
    for old in root.iterdir():
        try:
            if now - old.stat().st_mtime > max_age:
                shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink()
        except OSError:
            pass  # gone already (another process's sweep)


def sweep_empty_dirs(root: Path, min_age: float = 60.0) -> int:
    """Remove every empty folder under `root` (not `root` itself) unchanged for `min_age` seconds,
    deepest first; the number removed. Gradio's own cache deletion removes the files it served but
    leaves the folder each was in (one per file ever served)."""
    now, removed = time.time(), 0
    for d, _, files in os.walk(root, topdown=False):
        if Path(d) == Path(root) or files:
            continue
        try:
            if now - os.stat(d).st_mtime >= min_age:
                os.rmdir(d)  # fails (and is left) if anything was put there meanwhile
                removed += 1
        except OSError:
            pass
    return removed
