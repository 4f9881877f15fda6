"""Admission of computing jobs: one rule for every endpoint that computes.

A visitor is a session and a client address together: a job counts against both, so many sessions
from one client are one visitor (and one session seen from several addresses too). A `Lane` is a kind
of work with its own slots:

- per visitor at most `running` job (1) computing in the lane and `queued` more waiting (a few); a job
  over that, or over the lane's `max_waiting` for everyone, is refused at once (`Busy`), the message
  saying why and when to retry;
- the lane's slots go round-robin between visitors (a free slot to the waiting visitor served longest
  ago, one who never was first), so an honest visitor waits for at most one job of each other visitor
  ahead in the turn, however many that visitor queued;
- a job holds its slot at most `bound_s` seconds (`Turn.check` stops a job that runs over, between its
  chunks; `Turn.pause` hands the slot to a waiting visitor between chunks and queues again at the back).

A job is admitted in two steps when a queue stands in front (Gradio's): `reserve` when it asks to join
(refused at once, nothing queued), then `held` around its handler, which claims that reservation (a
`turn` inside it is not admitted again; a handler that needs no turn, a stored answer, gives its place
back on leaving). A reservation no handler claims within `reserve_ttl` seconds (a job dropped before it
ran) lapses.

    HEAVY = Lane("heavy", slots=1, queued=2, max_waiting=16, bound_s=120)
    HEAVY.reserve(Visitor("sess", "10.0.0.1"))          # in the queue's validator: Busy at once if over
    with HEAVY.turn(Visitor("sess", "10.0.0.1")) as t:   # in the handler: waits for its round-robin turn
        for chunk in chunks:
            t.check(); compute(chunk); t.pause()
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TypeVar

from attention.config import SETTINGS
from attention.errors import BudgetError
from attention.serving.threads import NicedThreads, torch_threads
from attention.serving.visitors import Busy, Visitor

T = TypeVar("T")


class _Ticket:
    __slots__ = ("visitor", "granted")

    def __init__(self, visitor: Visitor):
        self.visitor, self.granted = visitor, False


class Turn:
    """A running job's hold on its slot (see `Lane.turn`)."""

    def __init__(self, lane: Lane, ticket: _Ticket):
        self._lane, self._ticket = lane, ticket
        self.started = lane._clock()
        self.held = 0.0  # seconds the slot was held before the last pause

    def seconds(self) -> float:
        """Seconds this job has held a slot so far (waits between chunks not counted)."""
        return self.held + (self._lane._clock() - self.started)

    def check(self) -> None:
        """BudgetError when the job has held its slot over the lane's `bound_s` (its stated upper bound)."""
        if self.seconds() > self._lane.bound_s:
            raise BudgetError(
                f"This job ran over its bound of {self._lane.bound_s:,.0f} s on this server and was stopped; "
                "accepted: a smaller request (a shorter length, a lower frame rate or resolution)."
            )

    def pause(self) -> None:
        """Between chunks: if another visitor is waiting, hand them the slot and queue again at the back of
        the round; return when it is this job's turn again (at once when no one waits)."""
        lane = self._lane
        with lane._cond:
            if not any(q for k, q in lane._queue.items() if k != self._ticket.visitor.turn_key):
                return
            self.held += lane._clock() - self.started
            self._ticket.granted = False
            lane._enqueue(self._ticket)  # queued before the slot is freed: it keeps its place as just served
            lane._release_slot(self._ticket)
            lane._wait(self._ticket)
            self.started = lane._clock()


class Lane:
    """A kind of work with `slots` jobs computing at once, shared round-robin between visitors (see the
    module's doc). Thread-safe; every table is bounded by the jobs admitted."""

    def __init__(
        self,
        name: str,
        *,
        slots: int = 1,
        running: int = 1,
        queued: int = 2,
        max_waiting: int = 16,
        bound_s: float = 120.0,
        reserve_ttl: float = 30.0,
        threads: int | None = None,
        nice: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.name, self.slots, self.running, self.queued = name, max(1, slots), max(1, running), max(0, queued)
        self.max_waiting, self.bound_s, self.reserve_ttl, self._clock = max(0, max_waiting), bound_s, reserve_ttl, clock
        self.threads = threads  # torch threads of the thread inside a `turn` (None: left as they are)
        self.pool = NicedThreads(nice)  # the threads its jobs are handed to (`call`)
        self._cond = threading.Condition()
        self._running: dict[str, int] = {}  # key -> jobs computing
        self._reserved: dict[Visitor, deque[float]] = {}  # visitor -> when each unclaimed reservation was made
        self._queue: dict[str, deque[_Ticket]] = {}  # turn key -> its waiting jobs, in the order keys came
        self._served: dict[str, int] = {}  # turn key -> when its last job was granted (while it has jobs)
        self._busy, self._grants = 0, 0
        self._holding: dict[Visitor, int] = {}  # visitor -> admitted jobs inside `held` and not in a turn
        self._local = threading.local()  # the Visitor whose admitted job this thread's handler holds

    # ----- counts ---------------------------------------------------------------------------------
    def _lapse(self) -> None:
        now = self._clock()
        for v in list(self._reserved):
            q = self._reserved[v]
            while q and now - q[0] > self.reserve_ttl:
                q.popleft()
            if not q:
                del self._reserved[v]

    def _held(self, key: str) -> tuple[int, int]:
        """(running, waiting) of counter `key`: waiting = reservations and queued tickets."""
        waiting = sum(len(q) for v, q in self._reserved.items() if key in v.keys)
        waiting += sum(1 for q in self._queue.values() for t in q if key in t.visitor.keys)
        waiting += sum(n for v, n in self._holding.items() if key in v.keys)
        return self._running.get(key, 0), waiting

    def waiting(self) -> int:
        """Jobs admitted and not computing (reserved or queued), every visitor's."""
        with self._cond:
            self._lapse()
            return self._total()

    def _total(self) -> int:
        reserved = sum(len(q) for q in self._reserved.values())
        return reserved + sum(len(q) for q in self._queue.values()) + sum(self._holding.values())

    def _admit(self, visitor: Visitor) -> None:
        """Busy unless one more job of `visitor` fits (the caller holds the lock)."""
        self._lapse()
        for key in visitor.keys:
            running, waiting = self._held(key)
            if running + waiting >= self.running + self.queued:
                who = "this session" if key.startswith("s:") else "your address"
                raise Busy(
                    f"Not queued: {who} already has {running} job{'s' * (running != 1)} running and {waiting} "
                    f"waiting for the server's {self.name} work; each visitor may have {self.running} running "
                    f"and {self.queued} waiting, so that everyone gets a turn. Try again in about "
                    f"{self.bound_s:,.0f} s (each job runs at most that long), when one has finished.",
                    self.bound_s,
                )
        total = self._total()
        if total >= self.max_waiting:
            raise Busy(
                f"Not queued: the server's {self.name} work has {total} jobs waiting, the most it holds; try "
                f"again in about {self.bound_s:,.0f} s.",
                self.bound_s,
            )

    # ----- admission ------------------------------------------------------------------------------
    def reserve(self, visitor: Visitor) -> None:
        """Count a job of `visitor` that will reach `turn` soon (a queue's validator); Busy at once if over."""
        with self._cond:
            self._admit(visitor)
            self._reserved.setdefault(visitor, deque()).append(self._clock())

    def _claim(self, visitor: Visitor) -> None:
        """Take `visitor`'s oldest reservation, or admit the job now (Busy if over); the caller holds the lock."""
        self._lapse()
        if self._reserved.get(visitor):
            self._reserved[visitor].popleft()
            if not self._reserved[visitor]:
                del self._reserved[visitor]
        else:
            self._admit(visitor)

    def _hold(self, visitor: Visitor, n: int) -> None:
        self._holding[visitor] = self._holding.get(visitor, 0) + n
        if not self._holding[visitor]:
            del self._holding[visitor]

    @contextlib.contextmanager
    def held(self, visitor: Visitor) -> Iterator[None]:
        """Around a handler: claims `visitor`'s reservation (or admits the job now, Busy if over) and keeps it
        counted until the handler returns; a `turn` of the same visitor in this thread is then not admitted
        again. Nested or for an unknown visitor (no keys): nothing."""
        if not visitor.keys or getattr(self._local, "visitor", None) is not None:
            yield
            return
        with self._cond:
            self._claim(visitor)
            self._hold(visitor, 1)
        self._local.visitor = visitor
        try:
            yield
        finally:
            self._local.visitor = None
            with self._cond:
                self._hold(visitor, -1)

    @contextlib.contextmanager
    def turn(self, visitor: Visitor) -> Iterator[Turn]:
        """Hold a slot of the lane while inside: claims `visitor`'s reservation (or admits the job now, Busy
        if over; not again inside `held`), waits for its round-robin turn, then runs; the slot goes to the
        next visitor on leaving."""
        ticket = _Ticket(visitor)
        inside = getattr(self._local, "visitor", None) == visitor
        with self._cond:
            if inside:
                self._hold(visitor, -1)  # counted as its ticket now
            else:
                self._claim(visitor)
            self._enqueue(ticket)
            self._wait(ticket)
        try:
            with torch_threads(self.threads):
                yield Turn(self, ticket)
        finally:
            with self._cond:
                self._release_slot(ticket)
                if inside:
                    self._hold(visitor, 1)

    def call(self, fn: Callable[..., T], *args, **kwargs) -> T:
        """`fn(*args, **kwargs)` run in one of the lane's threads, at its `nice` (`NicedThreads`; nice 0, or
        where CUDA is available: in this thread), in a copy of this thread's context; its value, or its
        exception raised here. A handler that takes its `turn` inside `fn` waits for it in that thread."""
        return self.pool.call(fn, *args, **kwargs)

    # ----- the round (the caller holds the lock) --------------------------------------------------
    def _enqueue(self, ticket: _Ticket) -> None:
        self._queue.setdefault(ticket.visitor.turn_key, deque()).append(ticket)
        self._dispatch()

    def _wait(self, ticket: _Ticket) -> None:
        while not ticket.granted:
            self._cond.wait()

    def _release_slot(self, ticket: _Ticket) -> None:
        self._busy -= 1
        for key in ticket.visitor.keys:
            self._running[key] -= 1
            if not self._running[key]:
                del self._running[key]
        turn_key = ticket.visitor.turn_key
        if turn_key not in self._queue and not self._running.get(turn_key):
            self._served.pop(turn_key, None)  # no job left: a new one queues as a newcomer
        self._dispatch()

    def _may_run(self, visitor: Visitor) -> bool:
        return all(self._running.get(k, 0) < self.running for k in visitor.keys)

    def _dispatch(self) -> None:
        """Grant free slots round-robin: of the visitors whose next job may run (none of their counters at
        `running`), the one served longest ago (never: first; then in the order they came) gets it."""
        granted = False
        while self._busy < self.slots:
            ready = [k for k, q in self._queue.items() if q and self._may_run(q[0].visitor)]
            if not ready:
                break
            key = min(ready, key=lambda k: self._served.get(k, -1))  # min keeps the first of equals
            q = self._queue[key]
            ticket = q.popleft()
            if not q:
                del self._queue[key]
            self._grants += 1
            self._served[key] = self._grants
            ticket.granted, granted = True, True
            self._busy += 1
            for k in ticket.visitor.keys:
                self._running[k] = self._running.get(k, 0) + 1
        if granted:
            self._cond.notify_all()


HEAVY = Lane(
    "relevance and video",
    slots=SETTINGS.heavy_slots,
    queued=SETTINGS.visitor_queued,
    max_waiting=SETTINGS.heavy_waiting,
    bound_s=SETTINGS.job_seconds,
    threads=SETTINGS.heavy_threads,
    nice=SETTINGS.heavy_nice,
)
"""Relevance and attention videos: ATTENTION_HEAVY_SLOTS at once (2), shared round-robin between visitors;
per visitor 1 running and ATTENTION_VISITOR_QUEUED waiting (2); ATTENTION_HEAVY_WAITING waiting in all
(16); each job holds its slot at most ATTENTION_JOB_SECONDS (a video between its chunks), computing with
ATTENTION_HEAVY_THREADS torch threads on the CPU (0, the default: as torch has them), in threads at nice
ATTENTION_HEAVY_NICE on the CPU (`call`; the video's job thread: `gpu.streamed`), below the light lane's forwards."""
