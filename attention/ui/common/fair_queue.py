"""Gradio's own queue, served and admitted by the lanes' rule (`attention.crowd.rounds.Rota`).

Gradio keeps a queue per concurrency group (an event, or the heavy group) and starts its first job whenever a
worker of the group is free: first come, first served, so 30 jobs of one classroom (one address) or of one
flooder would all run before a visitor who came after them. `fair_queue` makes the next job of each group the
one the lanes would pick: the address served longest ago, then that address's session served longest ago.
`queue_room` admits a job when it asks to join (its validator), counting the jobs waiting in Gradio's queue or
running there: a session's at most ATTENTION_VISITOR_JOBS, an address's (every session from it together) at most
ATTENTION_ADDRESS_WAITING, everyone's at most ATTENTION_QUEUE_WAITING; over that, a refusal saying what is
counted and when to retry (sized from the jobs of that address running now). What Gradio is done with is not
counted: a finished job counts no more, whether or not its client has read the answer yet.

This reads Gradio's private queue (`Blocks._queue`: `event_queue_per_concurrency_id`, `active_jobs`,
`get_events`, `process_time_per_fn`; Gradio 6.31), checked at start-up (`fair_queue` raises RuntimeError).

    fair_queue(blocks)                        # at launch (attention.ui.common.server.LaunchKwargs)
    message, retry = queue_room(request)      # in a validator: None when admitted
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator

import gradio as gr

from attention.config import SETTINGS
from attention.crowd.admission import Lane
from attention.crowd.rounds import Rota
from attention.crowd.visitors import Busy, Visitor
from attention.ui.common.callers import mcp_caller, visitor_of

JUST_ADMITTED = 2.0  # seconds at most an admitted job counts before it shows in Gradio's queue (validator -> append)
_pending: dict[str, deque[float]] = {}  # counter key -> when its admitted jobs not yet seen in the queue were admitted
_lock = threading.Lock()


def _queue(blocks):
    """Gradio's queue of `blocks`, RuntimeError if it lacks what this module reads."""
    q = getattr(blocks, "_queue", None)
    if not (
        isinstance(getattr(q, "event_queue_per_concurrency_id", None), dict)
        and isinstance(getattr(q, "active_jobs", None), list)
        and callable(getattr(q, "get_events", None))
        and hasattr(q, "process_time_per_fn")
    ):
        import gradio as gr

        raise RuntimeError(
            f"gradio {gr.__version__}'s queue has no event_queue_per_concurrency_id, active_jobs, get_events or "
            "process_time_per_fn: attention.ui.common.fair_queue cannot serve it round-robin nor count a "
            "visitor's jobs."
        )
    return q


def event_visitor(event) -> Visitor:
    """Who a queued Gradio event is for: the MCP caller the guard signed (Gradio's session is every MCP
    client's), else its session and client address (kept on the event once found)."""
    known = getattr(event, "_attention_visitor", None)
    if known is None:
        request = getattr(event, "request", None)
        v = visitor_of(request)
        if mcp_caller(request) is None:
            v = Visitor(getattr(event, "session_hash", None), v.client)
        known = event._attention_visitor = v
    return known


def _keys(v: Visitor) -> tuple[str, ...]:
    """The counters a job of `v` in Gradio's queue is counted in: its session's, its address's, everyone's ("*")."""
    return (*v.keys, "*")


def _events(q) -> Iterator[tuple[object, bool]]:
    """(event, running) of every job in Gradio's queue: waiting in a group's queue, or started. An event seen
    for the first time here no longer counts as just admitted (its place in `_pending` is given back); the
    caller holds `_lock`."""
    for group in list(q.event_queue_per_concurrency_id.values()):
        for e in list(group.queue):
            yield _seen(e), False
    for batch in list(getattr(q, "active_jobs", None) or ()):
        for e in batch or ():
            yield _seen(e), True


def _seen(e):
    if not getattr(e, "_attention_counted", False):
        e._attention_counted = True
        for k in _keys(event_visitor(e)):
            if _pending.get(k):
                _pending[k].popleft()
    return e


class FairQueue:
    """`get_events` of Gradio's queue `q`: of the groups that can start a job now (jobs waiting, a worker free), in
    a random order as Gradio's own, the first whose waiting jobs include one of an address holding fewer than
    all but one of the group's workers (one stays free for another address: an address alone has the rest; its
    next job would only wait there for its own in the lane, one computing at a time); of those, the `Rota`'s
    pick. Gradio calls it every millisecond while jobs wait: a group with every worker busy is not looked at.
    Batched events keep Gradio's own pick."""

    def __init__(self, q):
        self.q, self.original, self.rotas = q, q.get_events, {}

    def __call__(self):
        groups = list(self.q.event_queue_per_concurrency_id.items())
        random.shuffle(groups)
        for group_id, group in groups:
            limit = group.concurrency_limit
            if not group.queue or (limit is not None and group.current_concurrency >= limit):
                continue
            if group.queue[0].fn.batch:
                return self._started(self.original())
            rota = self.rotas.setdefault(group_id, Rota())
            waiting = [event_visitor(e) for e in group.queue]
            running = [e for b in list(self.q.active_jobs) for e in b or () if e.concurrency_id == group_id]
            started = [event_visitor(e) for e in running]
            addresses = {v.turn_key for v in (*waiting, *started)}
            sessions = {v.session_key for v in (*waiting, *started)}
            for key in [k for k in rota.address if k not in addresses]:
                rota.forget(address=key)  # nothing of it left in this group: a newcomer when it comes back
            for key in [k for k in rota.session if k not in sessions]:
                rota.forget(session=key)
            held = Counter(v.turn_key for v in started)
            cap = None if limit is None else max(1, limit - 1)
            allowed = [i for i, v in enumerate(waiting) if cap is None or held[v.turn_key] < cap]
            if allowed:
                i = allowed[rota.pick([waiting[i] for i in allowed]) or 0]
                return self._started(([group.queue.pop(i)], False, group_id))
        return None

    def _started(self, picked):
        if picked:
            events, _, group_id = picked
            with _lock:
                for e in events:
                    _seen(e)  # it was admitted and is in: no longer counted as just admitted (it may end at once)
            for e in events:
                self.rotas.setdefault(group_id, Rota()).served(event_visitor(e))
                e._attention_began = time.time()  # for the retry hint of a refusal (`_typical`)
        return picked


def fair_queue(blocks) -> None:
    """Serve `blocks`' Gradio queue round-robin by the lanes' rule (see the module's doc); installing twice
    installs once. RuntimeError if Gradio's queue lacks what this reads."""
    q = _queue(blocks)
    if not isinstance(q.get_events, FairQueue):
        q.get_events = FairQueue(q)


def _typical(q, events: list) -> float:
    """Seconds until one of `events` (running) likely ends: Gradio's mean time of its function, less its time so
    far (1 s when Gradio has no mean yet); the soonest of them."""
    now, left = time.time(), []
    for e in events:
        mean = getattr(q.process_time_per_fn.get(e.fn), "avg_time", 0) or 1.0
        began = getattr(e, "_attention_began", None) or now
        left.append(mean - (now - began))
    return min(left, default=1.0)


def queue_room(request, blocks=None) -> tuple[str, float] | None:
    """None if one more job of `request`'s visitor fits Gradio's queue (and it is counted from now), else
    (the refusal's message, seconds after which to retry). Counted: the jobs waiting or running in Gradio's
    queue, plus those admitted that have not shown there yet (for at most JUST_ADMITTED seconds)."""
    from gradio.context import LocalContext

    blocks = blocks or LocalContext.blocks.get(None)
    if blocks is None or getattr(blocks, "_queue", None) is None:
        return None
    q = _queue(blocks)
    keys = _keys(visitor_of(request))
    counts, running = dict.fromkeys(keys, 0), {k: [] for k in keys}
    now = time.monotonic()
    with _lock:
        for e, is_running in _events(q):
            for k in set(keys).intersection(_keys(event_visitor(e))):
                counts[k] += 1
                if is_running:
                    running[k].append(e)
        for k in keys:
            dq = _pending.get(k, deque())
            while dq and now - dq[0] > JUST_ADMITTED:
                dq.popleft()
            counts[k] += len(dq)
        for k in keys:
            room = {"s": SETTINGS.visitor_jobs, "c": SETTINGS.address_waiting, "*": SETTINGS.queue_waiting}[k[0]]
            if counts[k] >= room:
                wait = min(60.0, max(1.0, _typical(q, running[k] or running["*"])))
                who = {
                    "s": "this session has",
                    "c": "your address has (every session from it counts together)",
                    "*": "the server has, from every visitor,",
                }[k[0]]
                each = {"s": "each session may have", "c": "each address may have", "*": "it holds at most"}[k[0]]
                return (
                    f"Not queued: {who} {counts[k]} requests waiting or running; {each} {room}, so that no one "
                    f"waits behind another's queue. Try again in about {wait:,.0f} s, when one has finished.",
                    wait,
                )
        for k in keys:
            _pending.setdefault(k, deque()).append(now)
        for k in [k for k, dq in _pending.items() if not dq or now - dq[-1] > JUST_ADMITTED]:
            del _pending[k]  # bounded by the keys admitted in the last seconds
    return None


def door(validator: Callable | None = None, lane: Lane | None = None) -> Callable:
    """A queue validator (Gradio runs it when a job asks to join, before it waits) that admits the job by
    `queue_room` (and reserves its place in `lane`, if any: `Lane.reserve`), then runs `validator`, if any. A
    refusal is a failed validation of the first input (the page marks it; gradio_client raises a
    ValidationError; nothing is queued), held ATTENTION_REFUSAL_DELAY seconds first (an asyncio sleep: a client
    looping on refusals gets one a second)."""

    async def share(request: gr.Request, *args):
        refusal = queue_room(request)
        if refusal is None and lane is not None:
            try:
                lane.reserve(visitor_of(request))
            except Busy as e:
                refusal = (str(e), e.retry_after)
        if refusal is not None:
            await asyncio.sleep(SETTINGS.refusal_delay)
            checks = [gr.validate(False, refusal[0])] + [gr.validate(True, "")] * (len(args) - 1)
            return checks if len(checks) > 1 else checks[0]  # one input: Gradio reads a list as one output value
        return validator(*args) if validator is not None else [gr.validate(True, "")] * len(args)

    return share
