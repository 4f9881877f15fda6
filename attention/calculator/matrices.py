"""Small matrices as a learner types them: parse text or table rows, check, format back.

Accepted text: rows separated by newlines or `;`, numbers by spaces and/or commas,
or a nested list like `[[1, 0], [0, 1]]`. A single row `1 2 3` is a 1 x 3 matrix.
Table input (a list of rows of cells, as a spreadsheet widget gives) goes through the
same checks. Every failure raises `InputError` naming the matrix, what was wrong and
what is accepted.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import numpy as np

from attention.config import SETTINGS
from attention.errors import InputError

MAX_SIZE = 64  # default bound on rows and columns of a typed matrix

ACCEPTED = "rows separated by newlines or ';', numbers by spaces or commas, or a nested list like [[1, 0], [0, 1]]"


def _number(token: str, name: str, row: int, col: int) -> float:
    try:
        x = float(token)
    except ValueError:
        raise InputError(
            f"{name}: '{token}' (row {row}, column {col}) is not a number; use numbers like 1, -0.5 or 2e-3"
        ) from None
    if not np.isfinite(x):
        raise InputError(
            f"{name}: '{token}' (row {row}, column {col}) is not a finite number; "
            f"NaN and infinity are not accepted as inputs"
        )
    return x


def _split_text(text: str) -> list[list[str]]:
    s = text.strip()
    if s.startswith("["):
        inner = s[1:-1].strip() if s.endswith("]") else s
        if inner.startswith("["):  # [[1, 2], [3, 4]] -> rows "1, 2" and "3, 4"
            rows = re.findall(r"\[([^\[\]]*)\]", inner)
            leftover = re.sub(r"\[[^\[\]]*\]", "", inner).replace(",", "").strip()
            if leftover:
                raise InputError(f"cannot read '{leftover}' between the rows of the nested list; accepted: {ACCEPTED}")
        else:  # [1, 2, 3] -> a single row
            rows = [inner]
    else:
        rows = re.split(r"[;\n]", s)
    rows = [r.strip() for r in rows]
    return [[t for t in re.split(r"[,\s]+", r) if t] for r in rows if r]


def _numpy_text(text: str) -> np.ndarray | None:
    """The plain form (rows by newline or ';', numbers by spaces or commas) read by numpy's C parser,
    about 10x faster than the hand parser at 64 x 64 (bench/bench_handwritten.py); None when numpy
    cannot read it or it holds NaN/inf, so the hand parser names the exact cell at fault."""
    if "[" in text or not text.strip():
        return None
    try:
        a = np.loadtxt(io.StringIO(text.replace(";", "\n").replace(",", " ")), ndmin=2, comments=None)
    except ValueError:
        return None
    return a if a.size and np.isfinite(a).all() else None


def _table_rows(value: Sequence[Sequence[object]] | np.ndarray, name: str) -> list[list[str]]:
    """Cells of a table as stripped strings; blank rows and blank trailing columns dropped."""
    rows = value.tolist() if isinstance(value, np.ndarray) else list(value)
    if rows and not isinstance(rows[0], (list, tuple)):
        rows = [rows]  # a single row
    cells = []
    for r in rows:
        if not isinstance(r, (list, tuple)):
            raise InputError(f"{name} must be a table (a list of rows), got a row of type {type(r).__name__}")
        cells.append(["" if c is None else str(c).strip() for c in r])
    cells = [r for r in cells if any(r)]
    while cells and all(r and not r[-1] for r in cells):
        cells = [r[:-1] for r in cells]
    return cells


def parse_matrix(
    value: str | Sequence[Sequence[object]] | np.ndarray | None,
    name: str = "matrix",
    *,
    max_size: int | None = MAX_SIZE,
) -> np.ndarray:
    """Read a matrix from text or table rows into a float64 array of shape (rows, cols).

    `value` is text (see the module docstring), a list of rows of cells (numbers or
    strings; entirely blank trailing rows and columns of a table are ignored), or an
    array. Raises InputError on text over SETTINGS.max_text_chars, empty input, non-numbers,
    NaN/inf, ragged rows, or more than `max_size` rows or columns (None: no bound).
    """
    if value is None:
        raise InputError(f"{name} is empty; enter at least one number ({ACCEPTED})")
    if isinstance(value, str):
        if len(value) > SETTINGS.max_text_chars:  # refused from its length, before any parsing
            raise InputError(
                f"{name} is {len(value):,} characters long; accepted: at most {SETTINGS.max_text_chars:,} "
                f"characters (a {MAX_SIZE} x {MAX_SIZE} matrix fits in far fewer)"
            )
        fast = _numpy_text(value)
        if fast is not None:
            return check_matrix(fast, name, max_size=max_size)
        try:  # the hand parser runs only to word the error (or for the nested-list form)
            rows = _split_text(value)
        except InputError as e:
            raise InputError(f"{name}: {e}") from None
    else:
        rows = _table_rows(value, name)
    if not rows:
        raise InputError(f"{name} is empty; enter at least one number ({ACCEPTED})")
    widths = [len(r) for r in rows]
    if len(set(widths)) > 1:
        bad = next(i for i, w in enumerate(widths) if w != widths[0])
        raise InputError(
            f"{name} has ragged rows: row 0 has {widths[0]} numbers but row {bad} has "
            f"{widths[bad]}; every row needs the same number of columns"
        )
    for i, r in enumerate(rows):
        for j, t in enumerate(r):
            if not t:
                raise InputError(f"{name}: cell (row {i}, column {j}) is blank; every cell needs a number")
    a = np.array([[_number(t, name, i, j) for j, t in enumerate(r)] for i, r in enumerate(rows)])
    return check_matrix(a, name, max_size=max_size)


def check_matrix(a: np.ndarray, name: str = "matrix", *, max_size: int | None = MAX_SIZE) -> np.ndarray:
    """Return `a` as a finite float64 2-D array (rows, cols) within `max_size`, or raise InputError."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise InputError(f"{name} must be a 2-D matrix, got shape {a.shape}")
    if a.size == 0:
        raise InputError(f"{name} is empty (shape {a.shape}); enter at least one number")
    if not np.isfinite(a).all():
        i, j = np.argwhere(~np.isfinite(a))[0]
        raise InputError(f"{name} holds {a[i, j]} at row {i}, column {j}; only finite numbers are accepted")
    if max_size is not None and max(a.shape) > max_size:
        raise InputError(
            f"{name} is {a.shape[0]} x {a.shape[1]}; this calculator accepts at most {max_size} x {max_size}"
        )
    return a


def format_number(x: float, digits: int = 4) -> str:
    """A compact string for one entry: '-inf' for masked entries, up to `digits` decimals (`digits`
    significant digits in e-notation from 1e6 on)."""
    if np.isneginf(x):
        return "-inf"
    if np.isfinite(x) and abs(x) >= 1e6:  # 1e+200, not two hundred digits
        return f"{x:.{digits}g}"
    s = f"{x:.{digits}f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def format_cells(a: np.ndarray, digits: int = 4) -> list[list[str]]:
    """The entries of a matrix (rows, cols) as strings (see `format_number`), row by row, as a table shows them."""
    return [[format_number(x, digits) for x in row] for row in np.atleast_2d(a)]


def format_matrix(a: np.ndarray, digits: int = 4) -> str:
    """Text for a matrix (rows, cols): one row a line, numbers separated by spaces; parse_matrix reads it back."""
    return "\n".join(" ".join(row) for row in format_cells(a, digits))
