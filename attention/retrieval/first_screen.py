"""The MNIST retrieval tab's first screen: every section at the tab's defaults, computed once per process."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from attention.retrieval import lookup
from attention.retrieval.panels import (
    DatabaseView,
    HardView,
    ManyView,
    SoftView,
    database_view,
    hard_view,
    many_view,
    soft_view,
)
from attention.retrieval.trained_panels import TrainedView, trained_view


class FirstScreen(NamedTuple):
    """Every section at the tab's defaults (database N = 100, seed 42; hard index 7; soft and many d = 16,
    key seed 0, scale 1, 16 queries; held-out query 0, shipped models)."""

    database: DatabaseView
    hard: HardView
    soft: SoftView
    many: ManyView
    trained: TrainedView


@lru_cache(maxsize=1)
def first_screen() -> FirstScreen:
    """The sections' default content, computed once per process (about 0.5 s) when first asked for."""
    db = (lookup.DEFAULT_N, lookup.DEFAULT_SEED)
    return FirstScreen(
        database_view(*db),
        hard_view(*db, 7, 0),
        soft_view(*db, 16, 0, 1.0),
        many_view(*db, 16, 0, 1.0, 16),
        trained_view(*db, 0),
    )
