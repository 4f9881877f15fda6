"""Admission of computing jobs: one rule for every endpoint that computes.

A visitor is a session and a client address together: a job counts against both, so many sessions
from one client are one visitor (and one session seen from several addresses too). A `Lane` is a kind
of work with its own slots:

- per session at most `running` job (1) computing in the lane and `queued` more waiting; per client address
  (every session from it together) at most `address_running` computing and `address_queued` waiting (a
  class's worth: its students wait their turns, they are not refused); a job over that, or over the lane's
  `max_waiting` for everyone, is refused at once (`Busy`), the message naming what is counted (the session,
  the address) and when to retry, sized from the job of its holding a slot (`retry_after`);
- the lane's slots go round-robin between addresses, then between an address's sessions (a free slot to the
  address served longest ago, one never served first; of its jobs, the session served longest ago's:
  `attention.crowd.rounds.Rota`), so an honest visitor waits for at most one job of each other address
  ahead in the turn, however many that address queued;
- a job holds its slot at most `bound_s` seconds (`Turn.check` stops a job that runs over, between its
  chunks; `Turn.pause` hands the slot to a waiting visitor between chunks and queues again at the back).

A job is admitted in two steps when a queue stands in front (Gradio's): `reserve` when it asks to join
(refused at once, nothing queued), then `held` around its handler, which claims that reservation (a
`turn` inside it is not admitted again; a handler that needs no turn, a stored answer, gives its place
back on leaving). A reservation no handler claims within `reserve_ttl` seconds (a job dropped before it
ran) lapses. An asyncio task waits for its turn with `aturn` (the same round as the threads': the grant
wakes it), leaving the queue if it is cancelled while waiting. The round itself (who gets a free slot,
`Turn`): `attention.crowd.rounds`.

    HEAVY = Lane("heavy", slots=1, queued=2, max_waiting=16, bound_s=120)
    HEAVY.reserve(Visitor("sess", "10.0.0.1"))          # in the queue's validator: Busy at once if over
    with HEAVY.turn(Visitor("sess", "10.0.0.1")) as t:   # in the handler: waits for its round-robin turn
        for chunk in chunks:
            t.check(); compute(chunk); t.pause()
    async with MCP.aturn(Visitor(None, "10.0.0.2")):   # an MCP tool call (no MCP session), in the event loop
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TypeVar

from attention.config import SETTINGS
from attention.crowd.rounds import Round, Ticket, Turn, waker
from attention.crowd.threads import NicedThreads, torch_threads
from attention.crowd.visitors import Busy, Visitor

T = TypeVar("T")


class Lane(Round):
    """A kind of work with `slots` jobs computing at once, shared round-robin between client addresses and then
    between an address's sessions (see the module's doc). Thread-safe; every table is bounded by the jobs
    admitted."""

    def __init__(
        self,
        name: str,
        *,
        slots: int = 1,
        running: int = 1,
        queued: int = 2,
        address_running: int | None = None,
        address_queued: int | None = None,
        max_waiting: int = 16,
        bound_s: float = 120.0,
        typical_s: float = 1.0,
        reserve_ttl: float = 30.0,
        threads: int | None = None,
        nice: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__(slots, running, bound_s, clock, address_running)
        self.name, self.queued, self.reserve_ttl = name, max(0, queued), reserve_ttl
        self.address_queued = self.queued if address_queued is None else max(0, address_queued)
        self.max_waiting = max(0, max_waiting)
        self.typical_s = float(typical_s)  # a job's seconds in a slot: a first guess, then the recent jobs' mean
        self.threads = threads  # torch threads of the thread inside a `turn` (None: left as they are)
        self.pool = NicedThreads(nice)  # the threads its jobs are handed to (`call`)
        self._reserved: dict[Visitor, deque[float]] = {}  # visitor -> when each unclaimed reservation was made
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

    def _finished(self, seconds: float) -> None:
        """A job left its slot after `seconds`: the typical job's time follows (a mean of the recent ones)."""
        self.typical_s = 0.8 * self.typical_s + 0.2 * max(0.0, seconds)

    def retry_after(self, key: str | None = None) -> float:
        """Seconds until one more job of counter `key` (None: anyone's) would likely be admitted: the time left of
        its job that holds a slot longest (of the lane's, for None or when it has none computing), by the typical
        job's time; at least 1 s, at most `bound_s` (the caller holds the lock)."""
        now = self._clock()
        mine = [t for t in self._active if key is None or key in t.visitor.keys] or list(self._active)
        left = min((self.typical_s - (now - t.since) for t in mine), default=self.typical_s)
        return min(self.bound_s, max(1.0, left if left > 0 else self.typical_s / 2))

    def _admit(self, visitor: Visitor) -> None:
        """Busy unless one more job of `visitor` fits (the caller holds the lock): its session's room (`running`
        + `queued`), its address's (`address_running` + `address_queued`, every session from it together) and
        the lane's (`max_waiting` for everyone). The message names what is counted and when to retry."""
        self._lapse()
        for key in visitor.keys:
            running, waiting = self._held(key)
            session = key.startswith("s:")
            room_running, room_queued = (
                (self.running, self.queued) if session else (self.address_running, self.address_queued)
            )
            if running + waiting >= room_running + room_queued:
                wait = self.retry_after(key)
                who = "this session" if session else "your address (every session from it counts together)"
                each = "each session" if session else "each address"
                raise Busy(
                    f"Not queued: {who} already has {running} job{'s' * (running != 1)} running and {waiting} "
                    f"waiting for the server's {self.name} work; {each} may have {room_running} running and "
                    f"{room_queued} waiting, so that everyone gets a turn. Try again in about {wait:,.0f} s, when "
                    "one has finished.",
                    wait,
                )
        total = self._total()
        if total >= self.max_waiting:
            wait = self.retry_after()
            raise Busy(
                f"Not queued: the server's {self.name} work has {total} jobs waiting from every visitor, the most "
                f"it holds; try again in about {wait:,.0f} s.",
                wait,
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
        ticket = Ticket(visitor)
        inside = getattr(self._local, "visitor", None) == visitor
        with self._cond:
            if inside:
                self._hold(visitor, -1)  # counted as its ticket now
            else:
                self._claim(visitor)
            self._enqueue(ticket)
            self._wait(ticket)
        turn = Turn(self, ticket)
        try:
            with torch_threads(self.threads):
                yield turn
        finally:
            with self._cond:
                self._finished(turn.seconds())
                self._release_slot(ticket)
                if inside:
                    self._hold(visitor, 1)

    @contextlib.asynccontextmanager
    async def aturn(self, visitor: Visitor) -> AsyncIterator[Turn]:
        """`turn` for an asyncio task, in the same round as the threads' turns: admitted now (Busy at once if
        over), then awaits its round-robin turn (the event loop is not blocked), then runs; the slot goes to
        the next visitor on leaving. Cancelled while waiting, the job leaves the queue; after its grant, its
        slot is freed. Its Turn's `pause` waits in a thread: not for an event loop."""
        event = asyncio.Event()
        ticket = Ticket(visitor, waker(asyncio.get_running_loop(), event))
        with self._cond:
            self._claim(visitor)
            self._enqueue(ticket)
        try:
            await event.wait()  # set by the grant (at once, in `_enqueue`, when a slot is free and it is its turn)
        except BaseException:
            with self._cond:
                self._withdraw(ticket)  # granted meanwhile: the slot released; else the place given up
            raise
        turn = Turn(self, ticket)
        try:
            yield turn
        finally:
            with self._cond:
                self._finished(turn.seconds())
                self._release_slot(ticket)

    def call(self, fn: Callable[..., T], *args, **kwargs) -> T:
        """`fn(*args, **kwargs)` run in one of the lane's threads, at its `nice` (`NicedThreads`; nice 0, or
        where CUDA is available: in this thread), in a copy of this thread's context; its value, or its
        exception raised here. A handler that takes its `turn` inside `fn` waits for it in that thread."""
        return self.pool.call(fn, *args, **kwargs)


HEAVY = Lane(
    "relevance and video",
    slots=SETTINGS.heavy_slots,
    queued=SETTINGS.visitor_jobs,
    address_queued=SETTINGS.address_waiting,
    max_waiting=SETTINGS.queue_waiting,
    bound_s=SETTINGS.job_seconds,
    typical_s=5.0,
    threads=SETTINGS.heavy_threads,
    nice=SETTINGS.heavy_nice,
)
"""Relevance and attention videos: ATTENTION_HEAVY_SLOTS at once (2), shared round-robin between addresses, then
between an address's sessions; one of each address computing at a time (a slot stays for another visitor's
short job). The jobs that reach it are those Gradio's heavy group started (`attention.ui.common.admit.HEAVY_QUEUE`:
slots + ATTENTION_HEAVY_WAITING at once), admitted and ordered in Gradio's queue (`attention.ui.common.fair_queue`);
the reservations its door makes (`attention.ui.common.admit.heavy_share`) count in rooms of the queue's sizes (a
session's ATTENTION_VISITOR_JOBS, an address's ATTENTION_ADDRESS_WAITING, everyone's ATTENTION_QUEUE_WAITING),
so a flooder's 64 cannot fill the lane for another address. Each job holds its slot at most
ATTENTION_JOB_SECONDS (a video between its chunks), computing with
ATTENTION_HEAVY_THREADS torch threads on the CPU (0, the default: as torch has them), in threads at nice
ATTENTION_HEAVY_NICE on the CPU (`call`; the video's job thread: `gpu.streamed`), below the light lane's forwards."""


MCP = Lane(
    "MCP tool calls",
    slots=SETTINGS.mcp_slots,
    queued=SETTINGS.visitor_queued,
    address_queued=SETTINGS.address_waiting,
    max_waiting=SETTINGS.queue_waiting,
    bound_s=60,
    typical_s=1.0,
)
"""MCP tool calls of the light endpoints, whole (Gradio's loopback upload, queue and result included:
`attention.ui.common.admit.gate_mcp_calls`): ATTENTION_MCP_SLOTS at once (1) for every MCP caller together, shared
round-robin between addresses, then between an address's MCP sessions (`aturn`, waiting in the event loop);
per MCP session 1 running and ATTENTION_VISITOR_QUEUED waiting (2), per address ATTENTION_ADDRESS_WAITING (64),
ATTENTION_QUEUE_WAITING in all (256). A crowd of agents never takes the page's visitors' share: agents behind
one address wait their turns (each call answered later, not refused), and a refusal is held a moment."""
