"""The calculator's settings: one frozen value, checked once where it is built, read by every step.

    heads       a whole number 1..MAX_SIZE; heads split the columns of Q, K (d) and V (d_v) evenly
    scale_mode  "default" (1/sqrt(d_head)), "none" (1) or "custom" (`scale`, at most MAX_SCALE in size)
    mask_mode   "none", "causal" (query i sees keys 0..i) or "custom" (`mask`: n x m of 0/1, 1 = may attend)
    dropout     in [0, 1): weights dropped by a generator seeded by `seed` (0..2**31 - 1), rest rescaled

The API, the form, a preset or a notebook builds one `Settings`; a bad value raises `FieldError`
(attention.errors) naming the setting ("heads", "scale", "mask", "dropout", "seed") and what is
accepted. What depends on the matrices (heads dividing d, the mask being n x m) is checked by
`steps.attend`, which knows them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.calculator.matrices import MAX_SIZE, parse_matrix
from attention.errors import FieldError, blame, check_int, check_number

MAX_SCALE = 1e6  # a custom scale's magnitude
MAX_SEED = 2**31 - 1
SCALE_MODES = ("default", "none", "custom")  # 1/sqrt(d_head), 1, the given number
MASK_MODES = ("none", "causal", "custom")  # custom: an n x m 0/1 matrix, 1 = may attend


def causal_mask(n: int, m: int) -> np.ndarray:
    """bool (n, m): query i may attend to keys 0..i (lower triangle, aligned top-left as in torch)."""
    return np.tril(np.ones((n, m), dtype=bool))


def _choice(value: object, accepted: tuple[str, ...], what: str, field: str) -> str:
    if value not in accepted:
        raise FieldError(f"{what} '{value}' is not known; use one of {', '.join(accepted)}", (field,))
    return str(value)


@dataclass(frozen=True)
class Settings:
    """How to attend, apart from the matrices (see the module). Built from what a form or an API
    caller sends (numbers may be floats or numeric text, the mask text, table rows or an array) and
    stored checked: heads and seed int, scale and dropout float (scale 1.0 unless custom), mask a
    tuple of rows of bools (None unless custom). Equal settings compare and hash equal."""

    heads: int = 1
    scale_mode: str = "default"
    scale: float | None = 1.0
    mask_mode: str = "none"
    mask: object = None
    dropout: float | None = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        scale_mode = _choice(self.scale_mode, SCALE_MODES, "scale mode", "scale")
        mask_mode = _choice(self.mask_mode, MASK_MODES, "mask mode", "mask")
        with blame("heads"):
            heads = check_int(self.heads, "heads", 1, MAX_SIZE)  # heads split d, which is at most MAX_SIZE
        with blame("seed"):
            seed = check_int(self.seed, "the dropout seed", 0, MAX_SEED)
        scale = 1.0
        if scale_mode == "custom":
            if self.scale is None:
                raise FieldError("the custom scale is empty; enter a number such as 0.5", ("scale",))
            with blame("scale"):
                scale = check_number(self.scale, "the custom scale", -MAX_SCALE, MAX_SCALE)
        with blame("dropout"):
            dropout = check_number(self.dropout or 0.0, "the dropout", 0, 1, below_hi=True)
        mask = None
        if mask_mode == "custom":
            with blame("mask"):
                a = parse_matrix(self.mask, "mask")
            bad = ~np.isin(a, (0.0, 1.0))
            if bad.any():
                raise FieldError(
                    f"the mask may hold only 0 (blocked) and 1 (may attend); found {a[bad][0]:g}", ("mask",)
                )
            mask = tuple(tuple(bool(x) for x in row) for row in a)
        checked = dict(heads=heads, scale_mode=scale_mode, scale=scale, mask_mode=mask_mode, mask=mask)
        for name, value in (checked | dict(dropout=dropout, seed=seed)).items():
            object.__setattr__(self, name, value)

    def scale_for(self, d_head: int) -> float:
        """The factor on the scores: 1/sqrt(d_head), 1 or the custom scale."""
        return {"default": 1.0 / np.sqrt(d_head), "none": 1.0, "custom": self.scale}[self.scale_mode]

    def mask_for(self, n: int, m: int) -> np.ndarray | None:
        """bool (n, m), True = may attend, for n queries and m keys; None when nothing is masked.
        A custom mask of another shape raises FieldError naming the mask and both shapes."""
        if self.mask_mode == "none":
            return None
        if self.mask_mode == "causal":
            return causal_mask(n, m)
        a = np.array(self.mask, dtype=bool)
        if a.shape != (n, m):
            raise FieldError(
                f"the mask is {a.shape[0]} x {a.shape[1]} but the scores are {n} x {m} "
                f"(Q rows x K rows): the mask needs one 0/1 entry per query-key pair",
                ("mask",),
            )
        return a
