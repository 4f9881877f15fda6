"""The light jobs of a crowded address compute below everyone else's CPU priority.

Gradio runs an event's function in a worker thread at nice 0, and `fair_queue` lets one address hold all but one
of a group's workers, so a classroom's or a flooder's forwards, one after another, can take both cores from a
visitor at another address: their light forwards run level with it, and its heavy jobs, at
ATTENTION_HEAVY_NICE (`attention.crowd.threads`), get a tenth of a core against them. So a job whose address has
others in Gradio's queue with it (`fair_queue.address_jobs`: jobs of two sessions or more, or three jobs or more:
more than one visitor's page sends at once) computes in a thread at ATTENTION_HEAVY_NICE too
(`NicedThreads`, the heavy lane's kind): a lone visitor at another address computes first, and its heavy job
competes with the crowd's forwards as an equal. A visitor whose address is not crowded runs at nice 0 as
before; nothing is refused or delayed by this, and with the CPU idle the crowd gets all of it.

Wraps every plain (not async, not generator) event function outside the heavy group, once, at launch: Gradio
still sees the function's own signature and type hints (`functools.wraps`).

    share_cpu(blocks)   # at launch (attention.ui.common.server.LaunchKwargs), after every event exists
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from attention.config import SETTINGS
from attention.crowd.threads import NicedThreads, thread_nice
from attention.ui.common.admit import HEAVY_QUEUE
from attention.ui.common.callers import visitor_of
from attention.ui.common.fair_queue import address_jobs

CROWD = NicedThreads(SETTINGS.heavy_nice, name="crowd")
"""The threads a crowded address's light jobs compute in."""


def crowded(blocks, request) -> bool:
    """Whether the address of `request` has other jobs in `blocks`' queue beside this one: jobs of two sessions
    or more, or three jobs or more."""
    if request is None or getattr(blocks, "_queue", None) is None:
        return False
    jobs, sessions = address_jobs(blocks, visitor_of(request))
    return sessions >= 2 or jobs >= 3


def _shared(fn: Callable, blocks) -> Callable:
    @functools.wraps(fn)
    def shared(*args, **kwargs):
        from gradio.context import LocalContext

        if CROWD.nice and thread_nice() < CROWD.nice and crowded(blocks, LocalContext.request.get(None)):
            return CROWD.call(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    shared._attention_cpu_share = True
    return shared


def share_cpu(blocks) -> int:
    """Wrap `blocks`' plain event functions outside the heavy group (see the module's doc); twice wraps once.
    Returns how many it wrapped now."""
    n = 0
    for block_fn in blocks.fns.values():
        fn = block_fn.fn
        if fn is None or getattr(fn, "_attention_cpu_share", False):
            continue
        if block_fn.concurrency_id == HEAVY_QUEUE["concurrency_id"]:
            continue  # computed in the heavy lane's niced threads already
        if inspect.iscoroutinefunction(fn) or inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            continue
        block_fn.fn = _shared(fn, blocks)
        n += 1
    return n
