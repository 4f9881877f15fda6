"""Turns: how many forward passes one visitor may have running at once.

    FORWARDS = Turns(limit=1)
    with FORWARDS.hold(session_id):   # BudgetError at once when that visitor is at the limit
        run_the_forward()

The server computes a few jobs at once (ATTENTION_CONCURRENCY) from one queue, first come first
served; a visitor who sends many heavy jobs would otherwise take every worker and make everyone
else wait behind them. With one fewer turn per visitor than there are workers, a worker is always
left for someone else, and a visitor's extra jobs are answered at once (refused), not computed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from attention.errors import BudgetError


class Turns:
    """At most `limit` forward passes of one visitor running at once; one more is refused at once
    (BudgetError), so that with the server computing `SETTINGS.concurrency` jobs at once one visitor
    never holds every worker: another visitor's request finds one free, and a visitor's extra jobs
    leave the queue in a moment instead of holding everyone behind them."""

    def __init__(self, limit: int):
        self.limit = max(1, int(limit))
        self._running: dict[str, int] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self, visitor: str | None) -> Iterator[None]:
        """Count a forward of `visitor` while inside; None: not counted (a script, the command line)."""
        if visitor is None:
            yield
            return
        with self._lock:
            n = self._running.get(visitor, 0)
            if n >= self.limit:
                raise BudgetError(
                    f"Your previous picture is still being computed: each visitor runs {self.limit} forward "
                    f"pass{'es' if self.limit > 1 else ''} at a time, so that every visitor gets a turn. This "
                    "request was not run; ask again when it has finished."
                )
            self._running[visitor] = n + 1
        try:
            yield
        finally:
            with self._lock:
                self._running[visitor] -= 1
                if not self._running[visitor]:
                    del self._running[visitor]
