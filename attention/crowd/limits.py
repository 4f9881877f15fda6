"""What a request and a client may cost, and the bounded tables the guard keeps to tell
(`attention.crowd.guard` is the middleware that applies them).

- `GuardLimits`: bytes per route, rates per second, table sizes, the refusal delay; `Routes`: which paths
  are which.
- `Buckets`: token buckets per client (new sessions, live-route calls, upload bytes); `Recent`: the
  session ids seen; `FolderBudget`: the upload folder's total against its limit.

    new_sessions = Buckets(rate=0.5, burst=30)
    if wait := new_sessions.take("10.0.0.1"):   # seconds until a token is there; 0.0: taken
        ...
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attention.crowd.memory import at_most_every

SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # Gradio's page: base-36 digits; gradio_client: a UUID


def session_id_ok(value: object) -> bool:
    """A session id this server accepts: a str of 1-64 characters of [A-Za-z0-9_-]."""
    return isinstance(value, str) and SESSION_ID.fullmatch(value) is not None


class Buckets:
    """Token buckets, one per key: `rate` tokens a second up to `burst`; at most `max_keys` keys (the
    least recently used forgotten, which starts it full again, as a client never seen)."""

    def __init__(self, rate: float, burst: float, max_keys: int = 10_000, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.max_keys, self._clock = float(rate), float(burst), int(max_keys), clock
        self._levels: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, when)
        self._lock = threading.Lock()

    def take(self, key: str, amount: float = 1.0) -> float:
        """Take `amount` tokens of `key`'s bucket: 0.0 if taken, else the seconds until they would be
        there (nothing taken). An amount over `burst` is never taken."""
        with self._lock:
            now = self._clock()
            tokens, when = self._levels.pop(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - when) * self.rate)
            wait = 0.0
            if amount > self.burst:
                wait = float("inf")
            elif tokens >= amount:
                tokens -= amount
            else:
                wait = (amount - tokens) / self.rate if self.rate > 0 else float("inf")
            self._levels[key] = (tokens, now)
            while len(self._levels) > self.max_keys:
                self._levels.popitem(last=False)
            return wait

    def pace(self, key: str, amount: float = 1.0, at_most: float = 0.0) -> tuple[float, bool]:
        """Take `amount` tokens of `key`'s bucket, into debt if the wait for them is at most `at_most` seconds:
        (the seconds until they would be there, whether they were taken). Over `at_most` (or `burst`), nothing
        is taken (the seconds are then the wait asked of a retry)."""
        with self._lock:
            now = self._clock()
            tokens, when = self._levels.pop(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - when) * self.rate)
            short = max(0.0, amount - tokens)
            wait = float("inf") if amount > self.burst else (short / self.rate if self.rate > 0 else float("inf"))
            if short == 0 or wait <= at_most:
                tokens -= amount
            self._levels[key] = (tokens, now)
            while len(self._levels) > self.max_keys:
                self._levels.popitem(last=False)
            return wait if short else 0.0, short == 0 or wait <= at_most

    def reserve(self, key: str, amount: float = 1.0) -> float:
        """Take `amount` tokens of `key`'s bucket now, into debt if they are not there: the seconds until
        they would have been (0.0: there). For pacing: the caller waits that long (bounded by what else
        limits how many it reserves)."""
        with self._lock:
            now = self._clock()
            tokens, when = self._levels.pop(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - when) * self.rate) - amount
            self._levels[key] = (tokens, now)
            while len(self._levels) > self.max_keys:
                self._levels.popitem(last=False)
            return 0.0 if tokens >= 0 else (-tokens / self.rate if self.rate > 0 else 0.0)

    def __len__(self) -> int:
        return len(self._levels)


class Recent:
    """A bounded set of strings, least recently seen out first."""

    def __init__(self, capacity: int):
        self.capacity, self._items = int(capacity), OrderedDict()

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def add(self, key: str) -> None:
        self._items.pop(key, None)
        self._items[key] = None
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


def folder_bytes(root: Path) -> int:
    """Bytes of every file under `root` (0 if it does not exist)."""
    total = 0
    for d, _, files in os.walk(root):
        for f in files:
            try:
                total += os.stat(os.path.join(d, f)).st_size
            except OSError:  # deleted meanwhile
                pass
    return total


class FolderBudget:
    """A folder's size against a limit: measured at most every `every` seconds (in a worker thread;
    `memory.at_most_every`), plus the bytes admitted since the last measure."""

    def __init__(self, root: Path | None, limit_bytes: int, every: float = 10.0, clock=time.monotonic):
        self.root, self.limit, self.every = root, int(limit_bytes), float(every)
        self.measured, self.added, self._due = 0, 0, at_most_every(self.every, clock=clock)

    async def admit(self, nbytes: int) -> bool:
        """True (and counted) if `nbytes` more keep the folder within its limit."""
        if self.root is None:
            return True
        if self._due():
            self.measured, self.added = await asyncio.to_thread(folder_bytes, self.root), 0
        if self.measured + self.added + nbytes > self.limit:
            return False
        self.added += nbytes
        return True


@dataclass(frozen=True)
class GuardLimits:
    """What one request and one client may cost (bytes, and rates per second)."""

    body_bytes: int = 1 << 20  # a request's body on any route without its own limit below
    live_body_bytes: int = 16 << 10  # a live-route call ([token, query, layer] as JSON)
    upload_body_bytes: int = 21 << 20  # one upload request (the largest upload and its multipart framing)
    mcp_body_bytes: int = 28 << 20  # an MCP call (an image may come base64-encoded: 4/3 of its bytes)
    new_sessions_per_s: float = 0.5  # new sessions a client may open, a second (burst: new_session_burst)
    new_session_burst: float = 30
    # seconds a new session over the burst is held for its token (paced, not refused); beyond, 429
    new_session_wait: float = 0.0
    # new sessions of a client started a second (as many at once); the rest of its burst waits its turn (an
    # asyncio sleep): each first call of a session builds Gradio's whole per-session state on the event loop
    new_session_pace: float = 2.0
    # the most that pacing holds a request (gradio_client gives up on a queue join after 5 s); the wait for a
    # token past the burst (new_session_wait) is not shortened
    new_session_hold: float = 4.0
    live_per_s: float = 20.0  # live-route calls of a client, a second (burst: twice as many)
    upload_bytes_per_s: float = 2 << 20  # upload bytes of a client, a second (burst: upload_burst_bytes)
    upload_burst_bytes: float = 120 << 20
    upload_folder_bytes: int = 4 << 30  # every file in the upload folder together
    max_sessions: int = 1000  # session ids remembered as seen (the app's own session capacity)
    max_clients: int = 10_000  # clients whose buckets are remembered
    refusal_delay: float = 1.0  # seconds a refusal (400, 403, 413, 429) is held before it is sent


@dataclass(frozen=True)
class Routes:
    """Which paths are which (prefixes of `scope["path"]`)."""

    live: str = "/gradio_api/component_server"
    upload: str = "/gradio_api/upload"
    mcp: str = "/gradio_api/mcp"
    fresh_session: tuple[str, ...] = ("/gradio_api/call/",)  # a POST without a session id opens one
    session_in_path: tuple[str, ...] = ("/gradio_api/heartbeat/",)  # the segment after it is a session id
