"""The query: which token's attention is shown. One type, read and written here only.

A query is a token name or a patch:
    "cls"       the class token
    "dist"      DeiT's distillation token
    "reg0".."regN"  registers, by position among the registers
    "pool"      the attention-pooling head's query (SigLIP, `*_map` ViTs): its one attention over
                the last layer's tokens, after the final norm; not a layer of the blocks
    (row, col)  a patch on the grid

    tokens_of(model)                       # ["cls", "reg0", "reg1", "reg2", "reg3"] (DINOv2-reg)
    parse("reg2"), parse("3,5"), parse([3, 5])   # "reg2", (3, 5), (3, 5)
    to_text((3, 5))                        # "3,5" (links, the command line); to_json: "cls" or [3, 5]
    index("reg2", grid, ("cls", "reg0", ...))    # 3: the token's position in the sequence

A name the model lacks is an InputError naming what it has.
"""

from __future__ import annotations

import re

import torch

from attention.errors import InputError, as_whole
from attention.vit.backbone import describe

Query = str | tuple[int, int]  # a token name or (row, col)
POOL = "pool"
_NAME = re.compile(r"^(cls|dist|pool|reg\d+)$")
ACCEPTED = "a token name (cls, dist, pool, reg0, reg1, ...) or a patch as ROW,COL (e.g. 3,5)"


def prefix_tokens(model: torch.nn.Module) -> tuple[str, ...]:
    """Names of the model's P prefix tokens, in sequence order (class, distillation, registers):
    its description's (`backbone.describe`)."""
    return describe(model).prefix


def has_pool(model: torch.nn.Module) -> bool:
    """Whether the model pools by attention (its description's `pool`: a pool head with its own query)."""
    return describe(model).pool


def tokens_of(model: torch.nn.Module) -> list[str]:
    """The named queries `model` has: its prefix tokens in order, then "pool" when it pools by attention."""
    return [*prefix_tokens(model), *([POOL] if has_pool(model) else [])]


def default(tokens: tuple[str, ...] | list[str], grid: tuple[int, int]) -> Query:
    """The query shown first: "cls" when there is one, else the pooling head's, else the centre patch
    (never a register: it is not a summary of the image)."""
    for name in ("cls", POOL):
        if name in tokens:
            return name
    return (grid[0] // 2, grid[1] // 2)


def parse(value) -> Query:
    """Any spelling of a query -> the one form: a lower-case token name, or (row, col) ints.
    Accepts "CLS", " reg2 ", "3,5", "(3, 5)", [3, 5], (3, 5) (whole floats too). InputError otherwise."""
    if isinstance(value, str):
        text = value.strip().lower()
        if _NAME.match(text):
            return text
        parts = text.strip("()[] ").split(",")
    elif isinstance(value, (list, tuple)) or (isinstance(value, torch.Tensor) and value.numel() == 2):
        parts = list(value)
    else:
        parts = []
    rc = [as_whole(v.strip() if isinstance(v, str) else v) for v in parts]
    if len(rc) != 2 or any(v is None or v < 0 for v in rc):
        raise InputError(f"Query {value!r} is not accepted; use {ACCEPTED}.")
    return (rc[0], rc[1])


def is_empty(v) -> bool:
    """An empty query field: None, NaN or blank text."""
    return v is None or (isinstance(v, float) and v != v) or (isinstance(v, str) and not v.strip())


def from_fields(row, col, token: str | None = None) -> Query | None:
    """A form's (row, col) fields -> a query: both empty means `token` (None: the model's default,
    `default`, chosen where the model is known), else a patch. InputError when only one is given or
    a value is not a whole number >= 0."""
    if is_empty(row) and is_empty(col):
        return None if token is None else parse(token)
    if is_empty(row) or is_empty(col):
        raise InputError(
            "Give both query_row and query_col for a patch query, or leave both empty for the model's own token "
            f"({token or 'CLS, or its pooling head'})."
        )
    r, c = as_whole(row), as_whole(col)
    if r is None or c is None or r < 0 or c < 0:
        raise InputError(
            f"Query ({row!r}, {col!r}) must be a pair of whole numbers >= 0: the row and column of a patch "
            "on the grid, or both empty for the model's token."
        )
    return (r, c)


def to_text(query: Query) -> str:
    """The one text form: the token name, or "row,col"."""
    q = parse(query)
    return q if isinstance(q, str) else f"{q[0]},{q[1]}"


def to_json(query: Query) -> str | list[int]:
    """The JSON form: the token name, or [row, col]."""
    q = parse(query)
    return q if isinstance(q, str) else [q[0], q[1]]


def label(query: Query, short: bool = False) -> str:
    """The one reader's name of a token, used by every label, caption and table: "the CLS token",
    "the distillation token", "register 2" (registers counted from 0, as "reg2"), "the attention-pooling
    head's query", "patch (row 3, col 5)"; `short`: "CLS", "distillation token", "register 2", "pool query",
    "patch (3, 5)"."""
    q = parse(query)
    if isinstance(q, tuple):
        return f"patch ({q[0]}, {q[1]})" if short else f"patch (row {q[0]}, col {q[1]})"
    if q.startswith("reg"):
        return f"register {int(q[3:])}"
    if short:
        return {"cls": "CLS", "dist": "distillation token", POOL: "pool query"}[q]
    return {"cls": "the CLS token", "dist": "the distillation token", POOL: "the attention-pooling head's query"}[q]


def at(j: int, prefix: tuple[str, ...] | list[str], grid: tuple[int, int]) -> Query:
    """The token at sequence index j (the inverse of `index`): a prefix token's name, else (row, col)."""
    P = len(prefix)
    if j < P:
        return prefix[j]
    r, c = divmod(j - P, grid[1])
    return (r, c)


def token_name(j: int, prefix: tuple[str, ...] | list[str], grid: tuple[int, int]) -> str:
    """Readable name of token j (`label`, short): CLS, distillation token, register i, patch (r, c). The one
    naming of tokens (score tables, the step-by-step view)."""
    return label(at(j, prefix, grid), short=True)


def kinds(prefix: tuple[str, ...] | list[str]) -> dict[str, list[int]]:
    """The prefix tokens' positions by kind, in order: {"CLS": [0], "distillation": [1], "registers": [2, ...]}
    (only the kinds the model has)."""
    out: dict[str, list[int]] = {}
    for j, name in enumerate(prefix):
        kind = "registers" if name.startswith("reg") else {"cls": "CLS", "dist": "distillation"}.get(name, name)
        out.setdefault(kind, []).append(j)
    return out


def prefix_phrase(prefix: tuple[str, ...] | list[str]) -> str:
    """The prefix in a few letters, for captions: "CLS", "CLS+dist", "CLS+reg", "reg" ("prefix" when none)."""
    short = {"CLS": "CLS", "distillation": "dist", "registers": "reg"}
    return "+".join(short.get(k, k) for k in kinds(prefix)) or "prefix"


def index(query: Query, grid: tuple[int, int], prefix: tuple[str, ...], pool: bool = False) -> int:
    """The query's token index: a prefix token's position, P + row * gw + col for a patch, -1 for
    "pool" (not in the sequence). InputError for a token the model lacks (naming what it has) or a
    patch off the grid."""
    q = parse(query)
    if isinstance(q, str):
        if q == POOL and pool:
            return -1
        if q in prefix:
            return prefix.index(q)
        has = [*prefix, *([POOL] if pool else [])]
        raise InputError(
            f"This model has no {q!r} token; it has {', '.join(has) if has else 'no named tokens'}"
            f"{' and' if has else ', only'} patches (row, col) on the {grid[0]}x{grid[1]} grid."
        )
    r, c = q
    if not (0 <= r < grid[0] and 0 <= c < grid[1]):
        raise InputError(
            f"Patch ({r}, {c}) is off the {grid[0]}x{grid[1]} grid; rows 0-{grid[0] - 1}, columns 0-{grid[1] - 1}."
        )
    return len(prefix) + r * grid[1] + c
