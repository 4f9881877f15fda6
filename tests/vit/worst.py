"""The worst deviation each test saw, by test id: what `python -m bench.models_compat` tabulates from a run of the
tests (docs/models.md's compatibility table). The comparisons record into it (`backbone_oracle.assert_rows_match`,
`relevance.test_compute.deviation`); nothing reads it during an ordinary run."""

from __future__ import annotations

import os

WORST: dict[str, float] = {}


def record(value: float) -> float:
    """Keep `value` as the running test's worst (max) deviation; returns it."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    if test:
        WORST[test] = max(WORST.get(test, 0.0), float(value))
    return value
