"""A crowded address's jobs compute below a lone visitor's CPU priority.

Gradio runs an event's function in a worker thread at nice 0, and `fair_queue` lets one address hold all but one
of a group's workers, so a classroom's or a flooder's forwards, one after another, can take both cores from a
visitor at another address. So a job whose address has others in Gradio's queue with it (`fair_queue.address_jobs`:
jobs of two sessions or more, or three jobs or more: more than one visitor's page sends at once) is crowded, and
computes at ATTENTION_CROWD_NICE (15), light or heavy: a light one in this module's `CROWD` threads, a heavy one in
its lane's crowd threads (`threads.CROWDED` set around it: `Lane.threads_now`). The order is then, from first:
a lone visitor's light jobs (nice 0), a lone visitor's heavy jobs (ATTENTION_HEAVY_NICE, 10), every crowded
address's jobs (15; Linux's CFS weighs nice 0, 10 and 15 as 1024, 110 and 36). Nothing is refused or delayed
by this, and with the CPU idle the crowd gets all of it.

Wraps every plain event function, and every generator one of the heavy group, once, at launch: Gradio still
sees the function's own signature and type hints (`functools.wraps`).

    share_cpu(blocks)   # at launch (attention.ui.common.server.LaunchKwargs), after every event exists
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from attention.config import SETTINGS
from attention.crowd.threads import CROWDED, NicedThreads, thread_nice
from attention.ui.common.admit import HEAVY_QUEUE
from attention.ui.common.callers import visitor_of
from attention.ui.common.fair_queue import address_jobs

CROWD = NicedThreads(max(SETTINGS.crowd_nice, SETTINGS.heavy_nice), name="crowd")
"""The threads a crowded address's light jobs compute in."""


def crowded(blocks, request) -> bool:
    """Whether the address of `request` has other jobs in `blocks`' queue beside this one: jobs of two sessions
    or more, or three jobs or more."""
    if request is None or getattr(blocks, "_queue", None) is None:
        return False
    jobs, sessions = address_jobs(blocks, visitor_of(request))
    return sessions >= 2 or jobs >= 3


def _crowded_now(blocks) -> bool:
    from gradio.context import LocalContext

    return crowded(blocks, LocalContext.request.get(None))


def _light(fn: Callable, blocks) -> Callable:
    @functools.wraps(fn)
    def shared(*args, **kwargs):
        if CROWD.nice and thread_nice() < CROWD.nice and _crowded_now(blocks):
            return CROWD.call(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    return shared


def _heavy(fn: Callable, blocks) -> Callable:
    @functools.wraps(fn)
    def shared(*args, **kwargs):
        token = CROWDED.set(_crowded_now(blocks))  # read by the lane's `call` inside fn
        try:
            return fn(*args, **kwargs)
        finally:
            CROWDED.reset(token)

    return shared


def _heavy_generator(fn: Callable, blocks) -> Callable:
    @functools.wraps(fn)
    def shared(*args, **kwargs):
        crowd = _crowded_now(blocks)
        steps = fn(*args, **kwargs)
        try:
            while True:  # Gradio resumes a generator in a fresh copy of its context each time: set it each step
                token = CROWDED.set(crowd)
                try:
                    item = next(steps)
                except StopIteration as stop:
                    return stop.value
                finally:
                    CROWDED.reset(token)
                yield item
        finally:
            steps.close()

    return shared


def share_cpu(blocks) -> int:
    """Wrap `blocks`' plain event functions and the heavy group's generators (see the module's doc); twice wraps
    once. Returns how many it wrapped now."""
    n = 0
    for block_fn in blocks.fns.values():
        fn = block_fn.fn
        if fn is None or getattr(fn, "_attention_cpu_share", False):
            continue
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            continue
        heavy = block_fn.concurrency_id == HEAVY_QUEUE["concurrency_id"]
        if inspect.isgeneratorfunction(fn):
            if not heavy:
                continue
            wrapped = _heavy_generator(fn, blocks)
        else:
            wrapped = (_heavy if heavy else _light)(fn, blocks)
        wrapped._attention_cpu_share = True
        block_fn.fn = wrapped
        n += 1
    return n
