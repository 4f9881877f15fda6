"""Who a computing job is for (`Visitor`: a session and a client address together), and the refusal of a
job over its visitor's share (`Busy`), as `attention.crowd.admission` charges and refuses them.

    Visitor("sess", "10.0.0.1").keys      # ("s:sess", "c:10.0.0.1"): the counters a job is charged to
    Visitor("sess", "10.0.0.1").turn_key  # "c:10.0.0.1": every session of one client takes one turn
"""

from __future__ import annotations

from dataclasses import dataclass

from attention.errors import BudgetError


class Busy(BudgetError):
    """A job refused at once: its visitor has as many running and waiting as allowed, or the lane's
    waiting room is full. `retry_after`: seconds after which a retry may be admitted."""

    def __init__(self, message: str, retry_after: float):
        super().__init__(message)
        self.retry_after = float(retry_after)


@dataclass(frozen=True)
class Visitor:
    """Who a job is for: the session id and the client address (either may be unknown: None)."""

    session: str | None = None
    client: str | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        """The counters a job of this visitor is charged to: its session's and its client's."""
        return tuple(k for k in (self.session and f"s:{self.session}", self.client and f"c:{self.client}") if k)

    @property
    def turn_key(self) -> str:
        """Whose turn a job takes in the round: its client's (all its sessions share one), else its session's."""
        return self.keys[-1] if self.keys else "-"

    @property
    def session_key(self) -> str:
        """Whose turn a job takes among its client's sessions: its session's counter (else its turn key)."""
        return self.keys[0] if self.session else self.turn_key
