"""Who gets a lane's next free slot: the round-robin between visitors of `attention.serving.admission.Lane`.

A `Round` holds the jobs waiting (a `Ticket` each, queued under its visitor's turn key: every session of
one client takes one turn) and the slots busy. A free slot goes to the visitor served longest ago whose
next job may run (one never served first, then in the order they came). A ticket is granted under the
round's lock; a thread waits for that on the round's condition, an asyncio task on its ticket's `wake`
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
from collections.abc import Callable

from attention.errors import BudgetError
from attention.serving.visitors import Visitor


class Ticket:
    """One job of `visitor` in the round: `granted` once it holds a slot; `wake()` is called at the grant
    (None: a thread waiting on the round's condition, which every grant notifies)."""

    __slots__ = ("visitor", "granted", "wake")

    def __init__(self, visitor: Visitor, wake: Callable[[], None] | None = None):
        self.visitor, self.granted, self.wake = visitor, False, wake


def waker(loop, event) -> Callable[[], None]:
    """A `Ticket.wake` that sets the asyncio `event` in its `loop` from any thread (nothing once the loop closed)."""

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: no one waits on it
            loop.call_soon_threadsafe(event.set)

    return wake


class Round:
    """`slots` jobs at once, each visitor's counters (`Visitor.keys`) at most `running` of them, shared
    round-robin between visitors (see the module's doc). The caller of every `_` method holds `_cond`."""

    def __init__(self, slots: int, running: int, bound_s: float, clock: Callable[[], float]):
        self.slots, self.running, self.bound_s, self._clock = max(1, slots), max(1, running), bound_s, clock
        self._cond = threading.Condition()
        self._running: dict[str, int] = {}  # key -> jobs computing
        self._queue: dict[str, deque[Ticket]] = {}  # turn key -> its waiting jobs, in the order keys came
        self._served: dict[str, int] = {}  # turn key -> when its last job was granted (while it has jobs)
        self._busy, self._grants = 0, 0

    def _enqueue(self, ticket: Ticket) -> None:
        self._queue.setdefault(ticket.visitor.turn_key, deque()).append(ticket)
        self._dispatch()

    def _wait(self, ticket: Ticket) -> None:
        while not ticket.granted:
            self._cond.wait()

    def _forget_served(self, turn_key: str) -> None:
        if turn_key not in self._queue and not self._running.get(turn_key):
            self._served.pop(turn_key, None)  # no job left: a new one queues as a newcomer

    def _release_slot(self, ticket: Ticket) -> None:
        self._busy -= 1
        for key in ticket.visitor.keys:
            self._running[key] -= 1
            if not self._running[key]:
                del self._running[key]
        self._forget_served(ticket.visitor.turn_key)
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
        self._forget_served(key)
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
            if ticket.wake is not None:
                ticket.wake()
        if granted:
            self._cond.notify_all()


class Turn:
    """A running job's hold on its slot (see `attention.serving.admission.Lane.turn`)."""

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
