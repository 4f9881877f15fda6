"""One bounded store for what the server keeps between requests: least recently used out first,
a total byte budget, a time to live, and one computation per key however many ask at once.

Shared by every visitor, so it is thread-safe. Keys must identify the *content* of what is
computed (e.g. an image digest, a model name and a resolution) and, for what a visitor brought,
the visitor too: two visitors who send the same example get the same entry, while a visitor's own
upload is theirs alone (no one learns from a fast answer that someone else sent that picture).
Each entry is charged to an owner, whose share of the budget is bounded (`max_owner_bytes`), and an
owner who stopped asking keeps after `idle` seconds only their newest values within `idle_bytes`
(`sweep` applies both clocks without waiting for a request). An owner may be a pair (group, member), e.g.
(client address, session): a group's owners together stay under `max_group_bytes`, the idle rule and the store's
eviction then apply to the group, so twenty sessions of one address hold what one address may, not twenty shares.

    cache = SharedCache(max_bytes=1 << 30, ttl=1800, max_owner_bytes=1 << 28, idle=30, idle_bytes=1 << 26)
    value = cache.get_or_run(key, lambda: compute())   # computed once, even from 8 threads at once
    value = cache.get_or_run(key, compute, owner=visitor)  # kept within that visitor's share
    value = cache.get_or_run(key, compute, owner=(address, session))  # and within the address's share

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

from attention.crowd.memory import at_most_every


class Sized(Protocol):
    @property
    def nbytes(self) -> int: ...


V = TypeVar("V", bound=Sized)


class SharedCache(Generic[V]):
    """Values with an `nbytes` under `max_bytes` in total, each dropped `ttl` seconds after its
    last use. A value larger than `max_bytes` (or than `max_owner_bytes`) is returned but not kept.

    Every value is charged to an `owner` (a visitor; None = nobody in particular): one owner's values
    together stay under `max_owner_bytes`, its own least recently used dropped first, so an owner's
    new values never push out another's while it is within its share. When the total is full, the
    value dropped is the least recently used of the owner holding the most bytes (the new value
    counted for its owner), so a crowd shares the budget evenly and no owner can empty it of others.

    An owner none of whose values was used for `idle` seconds (None: never) keeps only its most
    recently used values that fit in `idle_bytes` together, and always its most recently used one
    (until `ttl`): what a visitor who stopped asking holds is then at most the larger of `idle_bytes`
    and one value, however many they made, while an active visitor's recent values all stay.

    An owner that is a pair (group, member) is also bounded by its group: all the group's values together stay
    under `max_group_bytes` (the group's least recently used dropped first), and the idle rule and the store's
    eviction count groups, not owners (a plain owner is a group of its own).

    Why not cachetools: its caches bound bytes (`getsizeof`) and age (TTLCache) and `cached(condition=)`
    computes a key once, but they evict by one policy over all keys: no share per owner, no eviction
    from the owner holding the most, which is what keeps one visitor from emptying the store of others."""

    def __init__(
        self,
        max_bytes: int,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
        max_owner_bytes: int | None = None,
        idle: float | None = None,
        idle_bytes: int = 0,
        max_group_bytes: int | None = None,
    ):
        self.max_bytes, self.ttl, self._clock = int(max_bytes), float(ttl), clock
        self.max_owner_bytes = self.max_bytes if max_owner_bytes is None else int(max_owner_bytes)
        self.max_group_bytes = self.max_bytes if max_group_bytes is None else int(max_group_bytes)
        self.idle, self.idle_bytes = (None if idle is None else float(idle)), int(idle_bytes)
        self._last: dict[Hashable, float] = {}  # group -> when it last used (or put) any of its values
        self._trimmed: set[Hashable] = set()  # idle groups already trimmed
        # key -> (value, bytes, last use, owner), least recently used first
        self._items: OrderedDict[Hashable, tuple[V, int, float, Hashable]] = OrderedDict()
        self._owned: dict[Hashable, int] = {}  # owner -> bytes of its values
        self._grouped: dict[Hashable, int] = {}  # group -> bytes of its owners' values
        self._inflight: dict[Hashable, Future] = {}
        self._lock = threading.Lock()
        self.nbytes = 0
        self.computed = 0  # how many times a value was computed (for tests and benches)

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._items)

    def owned(self, owner: Hashable) -> int:
        """Bytes of the values charged to `owner`."""
        with self._lock:
            self._expire()
            return self._owned.get(owner, 0)

    def group_owned(self, group: Hashable) -> int:
        """Bytes of the values charged to the owners of `group` (a plain owner: its own)."""
        with self._lock:
            self._expire()
            return self._grouped.get(group, 0)

    def sweep(self) -> int:
        """Apply the time to live and the idle rule now (they are otherwise applied at each call);
        the bytes dropped."""
        with self._lock:
            before = self.nbytes
            self._expire()
            return before - self.nbytes

    def get(self, key: Hashable) -> V | None:
        """The value of `key` if kept (and fresh), marking it used; else None."""
        with self._lock:
            self._expire()
            return self._touch(key)

    def put(self, key: Hashable, value: V, owner: Hashable = None) -> None:
        """Keep `value` under `key`, charged to `owner`, dropping values until it fits (see the class)."""
        with self._lock:
            self._put(key, value, owner)

    def get_or_run(self, key: Hashable, compute: Callable[[], V], owner: Hashable = None) -> V:
        """The kept value of `key`, else `compute()` run once and kept for `owner`: callers asking for
        the same key meanwhile wait for that one result (or get its exception)."""
        with self._lock:
            self._expire()
            kept = self._touch(key)
            if kept is not None:
                return kept
            fut = self._inflight.get(key)
            is_first = fut is None
            if is_first:
                fut = self._inflight[key] = Future()
        if not is_first:
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
            self._put(key, value, owner)
            del self._inflight[key]
        fut.set_result(value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._owned.clear()
            self._grouped.clear()
            self._last.clear()
            self._trimmed.clear()
            self.nbytes = 0

    def _touch(self, key: Hashable) -> V | None:
        if key not in self._items:
            return None
        value, size, _, owner = self._items.pop(key)
        self._items[key] = (value, size, self._clock(), owner)
        self._used(group_of(owner))
        return value

    def _used(self, group: Hashable) -> None:
        self._last[group] = self._clock()
        self._trimmed.discard(group)

    def _drop(self, key: Hashable) -> None:
        _, size, _, owner = self._items.pop(key)
        self.nbytes -= size
        self._owned[owner] -= size
        if not self._owned[owner]:
            del self._owned[owner]
        group = group_of(owner)
        self._grouped[group] -= size
        if not self._grouped[group]:
            del self._grouped[group]
            self._last.pop(group, None)
            self._trimmed.discard(group)

    def _oldest_of(self, owner: Hashable) -> Hashable:
        return next(k for k, item in self._items.items() if item[3] == owner)

    def _oldest_in(self, group: Hashable) -> Hashable:
        return next(k for k, item in self._items.items() if group_of(item[3]) == group)

    def _put(self, key: Hashable, value: V, owner: Hashable) -> None:
        if key in self._items:
            self._drop(key)
        size, group = int(value.nbytes), group_of(owner)
        if size > min(self.max_bytes, self.max_owner_bytes, self.max_group_bytes):
            return
        while self._owned.get(owner, 0) + size > self.max_owner_bytes:  # the owner's share: its own go first
            self._drop(self._oldest_of(owner))
        while self._grouped.get(group, 0) + size > self.max_group_bytes:  # the group's: its own go first
            self._drop(self._oldest_in(group))
        while self.nbytes + size > self.max_bytes:  # the whole store: from the group holding the most
            held = {g: b + (size if g == group else 0) for g, b in self._grouped.items()}
            richest = max(held, key=lambda g: (held[g], g == group))  # a tie: the newcomer's own first
            self._drop(self._oldest_in(richest))
        self._items[key] = (value, size, self._clock(), owner)
        self.nbytes += size
        self._owned[owner] = self._owned.get(owner, 0) + size
        self._grouped[group] = self._grouped.get(group, 0) + size
        self._used(group)

    def _expire(self) -> None:
        cutoff = self._clock() - self.ttl
        while self._items:
            key, (_, _, used, _) = next(iter(self._items.items()))
            if used > cutoff:
                break
            self._drop(key)
        if self.idle is None:
            return
        cutoff = self._clock() - self.idle
        idle = {g for g, t in self._last.items() if t <= cutoff and g not in self._trimmed}
        if not idle:
            return
        self._trimmed |= idle
        recent: dict[Hashable, list[Hashable]] = {g: [] for g in idle}  # idle group -> its keys, newest first
        for key in reversed(self._items):
            if (group := group_of(self._items[key][3])) in recent:
                recent[group].append(key)
        for keys in recent.values():
            kept = self._items[keys[0]][1] if keys else 0  # the newest stays, whatever its size
            for i, key in enumerate(keys[1:], 1):
                if kept + self._items[key][1] > self.idle_bytes:
                    for old in keys[i:]:
                        self._drop(old)
                    break
                kept += self._items[key][1]


def group_of(owner: Hashable) -> Hashable:
    """The group an owner's values count in: the first of a pair (group, member), else the owner itself."""
    return owner[0] if isinstance(owner, tuple) and len(owner) == 2 else owner


_sweep_gates: dict[Path, Callable[[], bool]] = {}  # root -> its `memory.at_most_every` gate
_sweep_lock = threading.Lock()


def sweep(root: Path, max_age: float, every: float = 60.0) -> None:
    """Delete the files and folders directly under `root` last modified over `max_age` seconds ago,
    at most once every `every` seconds per root (`memory.at_most_every`: one thread sweeps; the others
    go on at once). What a server writes there is then bounded by traffic x age."""
    with _sweep_lock:
        due = _sweep_gates.setdefault(root, at_most_every(every))
    if not due():
        return
    now = time.time()
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
