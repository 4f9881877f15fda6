"""Who gets a lane's next free slot: the round-robin between visitors of `attention.crowd.admission.Lane`.

A `Round` holds the jobs waiting (a `Ticket` each, queued under its visitor's turn key: every session of
one client takes one turn) and the slots busy. A free slot goes by the `Rota`'s rule: of the jobs that may
run, the one whose client address was served longest ago (one never served first, then in the order they
came), then, of that address's, the one whose session was served longest ago: round-robin between
addresses first, then between the sessions of an address (a classroom behind one address takes its turns
student by student). The same rule orders Gradio's own queue (`attention.ui.common.fair_queue`). A ticket is
granted under the round's lock; a thread waits for that on the round's condition, an asyncio task on its ticket's `wake`
(called by the grant, from whatever thread frees the slot). A `Turn` is a granted job's hold on its slot.

    with round._cond:
        round._enqueue(ticket)   # granted at once if a slot is free and it is this visitor's turn
        round._wait(ticket)      # or, in asyncio: ticket.wake sets an event the task awaits
    ...
    with round._cond:
        round._release_slot(ticket)   # the slot goes to the next visitor in the round
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Sequence

from attention.crowd.visitors import Visitor
from attention.errors import BudgetError


class Ticket:
    """One job of `visitor` in the round: `granted` once it holds a slot; `wake()` is called at the grant
    (None: a thread waiting on the round's condition, which every grant notifies)."""

    __slots__ = ("visitor", "granted", "wake", "since")

    def __init__(self, visitor: Visitor, wake: Callable[[], None] | None = None):
        self.visitor, self.granted, self.wake = visitor, False, wake
        self.since = 0.0  # when it was last granted (the lane's clock)


def waker(loop, event) -> Callable[[], None]:
    """A `Ticket.wake` that sets the asyncio `event` in its `loop` from any thread (nothing once the loop closed)."""

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: no one waits on it
            loop.call_soon_threadsafe(event.set)

    return wake


class Rota:
    """The round-robin rule, one implementation for a lane's slots and for Gradio's queue: `pick` of the
    candidates (in the order they came) the one whose address was served longest ago (never served: first;
    equals: the first given), then of that address's, the one whose session was served longest ago; `served`
    records a grant. Its tables hold the addresses and sessions `forget` has not dropped (the caller drops
    those with nothing left waiting or running)."""

    def __init__(self) -> None:
        self.grants = 0
        self.address: dict[str, int] = {}  # turn key -> the grant number of its last job
        self.session: dict[str, int] = {}  # session key -> the same

    def pick(self, visitors: Sequence[Visitor]) -> int | None:
        """Index of the visitor whose job goes next (None: no candidate)."""
        best, best_rank = None, None
        for i, v in enumerate(visitors):
            rank = (self.address.get(v.turn_key, -1), self.session.get(v.session_key, -1))
            if best_rank is None or rank < best_rank:
                best, best_rank = i, rank
        return best

    def served(self, visitor: Visitor) -> None:
        self.grants += 1
        self.address[visitor.turn_key] = self.session[visitor.session_key] = self.grants

    def forget(self, address: str | None = None, session: str | None = None) -> None:
        """Drop an address's or a session's record (nothing of it left waiting or running: it comes back as new)."""
        self.address.pop(address, None)
        self.session.pop(session, None)


class Round:
    """`slots` jobs at once, a session's at most `running` of them and a client address's at most
    `address_running` (default: `running`), shared round-robin (`Rota`; see the module's doc). The caller
    of every `_` method holds `_cond`."""

    def __init__(
        self,
        slots: int,
        running: int,
        bound_s: float,
        clock: Callable[[], float],
        address_running: int | None = None,
    ):
        self.slots, self.running, self.bound_s, self._clock = max(1, slots), max(1, running), bound_s, clock
        self.address_running = max(1, running if address_running is None else address_running)
        self._cond = threading.Condition()
        self._running: dict[str, int] = {}  # key -> jobs computing
        self._queue: dict[str, deque[Ticket]] = {}  # turn key -> its waiting jobs, in the order keys came
        self._rota = Rota()  # who was served when (addresses and sessions with jobs)
        self._busy = 0
        self._active: set[Ticket] = set()  # the granted jobs

    def cap(self, key: str) -> int:
        """Jobs of counter `key` that may compute at once: a session's `running`, an address's `address_running`."""
        return self.running if key.startswith("s:") else self.address_running

    def _enqueue(self, ticket: Ticket) -> None:
        self._queue.setdefault(ticket.visitor.turn_key, deque()).append(ticket)
        self._dispatch()

    def _wait(self, ticket: Ticket) -> None:
        while not ticket.granted:
            self._cond.wait()

    def _forget_served(self, visitor: Visitor) -> None:
        """Forget `visitor`'s address, and its session, once it has no job left: a new one queues as a newcomer."""
        q = self._queue.get(visitor.turn_key, ())
        if not q and not self._running.get(visitor.turn_key):
            self._rota.forget(address=visitor.turn_key)
        if not self._running.get(visitor.session_key) and all(t.visitor.session_key != visitor.session_key for t in q):
            self._rota.forget(session=visitor.session_key)

    def _release_slot(self, ticket: Ticket) -> None:
        self._busy -= 1
        self._active.discard(ticket)
        for key in ticket.visitor.keys:
            self._running[key] -= 1
            if not self._running[key]:
                del self._running[key]
        self._forget_served(ticket.visitor)
        self._dispatch()

    def _withdraw(self, ticket: Ticket) -> None:
        """A job that leaves (cancelled): its slot released if granted, else its place in the queue given up."""
        if ticket.granted:
            self._release_slot(ticket)
            return
        key = ticket.visitor.turn_key
        q = self._queue.get(key)
        if q is not None and ticket in q:
            q.remove(ticket)
            if not q:
                del self._queue[key]
        self._forget_served(ticket.visitor)
        self._dispatch()

    def _may_run(self, visitor: Visitor) -> bool:
        return all(self._running.get(k, 0) < self.cap(k) for k in visitor.keys)

    def _dispatch(self) -> None:
        """Grant free slots by the `Rota`: of the jobs that may run (none of their counters at its cap), the
        address served longest ago, then its session served longest ago, gets it."""
        granted = False
        while self._busy < self.slots:
            ready = [t for q in self._queue.values() for t in q if self._may_run(t.visitor)]
            i = self._rota.pick([t.visitor for t in ready])
            if i is None:
                break
            ticket = ready[i]
            key = ticket.visitor.turn_key
            q = self._queue[key]
            q.remove(ticket)
            if not q:
                del self._queue[key]
            self._rota.served(ticket.visitor)
            ticket.granted, granted = True, True
            ticket.since = self._clock()
            self._active.add(ticket)
            self._busy += 1
            for k in ticket.visitor.keys:
                self._running[k] = self._running.get(k, 0) + 1
            if ticket.wake is not None:
                ticket.wake()
        if granted:
            self._cond.notify_all()


class Turn:
    """A running job's hold on its slot (see `attention.crowd.admission.Lane.turn`)."""

    def __init__(self, lane: Round, ticket: Ticket):
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
        """Between chunks: if another visitor is waiting (another address, or another session of this job's
        address), hand them the slot and queue again at the back of the round; return when it is this job's
        turn again (at once when no one waits)."""
        lane = self._lane
        with lane._cond:
            mine = self._ticket.visitor.session_key
            if not any(t.visitor.session_key != mine for q in lane._queue.values() for t in q):
                return  # no one else (another address, or another session of this one) waits
            self.held += lane._clock() - self.started
            self._ticket.granted = False
            lane._enqueue(self._ticket)  # queued before the slot is freed: it keeps its place as just served
            lane._release_slot(self._ticket)
            lane._wait(self._ticket)
            self.started = lane._clock()
