"""What a visitor sends, read once: the query fields, layer and head indices, and an image's
identity (a content digest, and whether it is one of the shipped examples).

    parse_query(2, 3) == (2, 3); parse_query(None, None) is None     # None: the model's own token
    parse_index("-1", "Layer") == -1
    parse_layer(None) == -1; parse_head("") == 0                      # empty: the last layer, the first head
    view_request("mean", query_row=2, query_col=3, layer="-1")        # one checked request.ViewSpec
    file_digest("cat.jpg") in example_digests()                       # a shipped example?
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import numpy as np

from attention.config import EXAMPLES_DIR
from attention.images import ImageSource
from attention.vit.engine.query import Query, from_fields
from attention.vit.engine.request import parse_head, parse_index, parse_layer, view_request

__all__ = ["parse_head", "parse_index", "parse_layer", "view_request"]  # read once in `request`, named here as before


def parse_query(row: float | int | None, col: float | int | None, token: str | None = None) -> Query | None:
    """(row, col) numbers -> a query (`query.from_fields`): both empty (None or NaN) means `token`,
    None = the model's own (`Pass.default_query`), else a patch (int, int).

    Raises InputError when only one is given or a value is not a whole number.
    """
    return from_fields(row, col, token)


def file_digest(src: ImageSource) -> str:
    """A content digest of an image source: sha1 of the file, the bytes, or the pixels with their
    shape and mode (never an object's identity, which Python reuses once an object is freed)."""
    if isinstance(src, (str, os.PathLike)):
        h = hashlib.sha1()
        try:
            with open(src, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        except OSError:
            return f"path:{os.fspath(src)}"  # load_image will report it
        return h.hexdigest()
    if isinstance(src, (bytes, bytearray)):
        return hashlib.sha1(src).hexdigest()
    if isinstance(src, np.ndarray):
        a = np.ascontiguousarray(src)
        return hashlib.sha1(f"{a.shape}{a.dtype}".encode() + a.tobytes()).hexdigest()
    return hashlib.sha1(f"{src.size}{src.mode}".encode() + src.tobytes()).hexdigest()  # PIL image


def source_stamp(src: ImageSource | None) -> tuple | None:
    """What tells a file apart without reading it: (path, size, modification time in ns, inode), for
    a path; None for anything else or a file that cannot be read (never equal: hash it)."""
    if not isinstance(src, (str, os.PathLike)):
        return None
    try:
        st = os.stat(src)
    except OSError:
        return None
    return os.fspath(src), st.st_size, st.st_mtime_ns, st.st_ino


@functools.cache
def example_files() -> dict[str, Path]:
    """Every shipped example image by name (file name without extension): photos and digits."""
    return {p.stem: p for d in ("photos", "digits") for p in sorted((EXAMPLES_DIR / d).glob("*.*"))}


@functools.cache
def example_digests() -> dict[str, str]:
    """Content digest -> name of every shipped example image (`example_files`)."""
    return {file_digest(str(p)): name for name, p in example_files().items()}


def visitor_scope(digest: str, visitor) -> str:
    """Whose a result about the picture of `digest` is, as part of its cache key: "" (everyone's) for a
    shipped example or when nobody in particular asks (None: a script, the command line), else the
    visitor's: a session id (str), or an `admission.Visitor`'s session, else its client address. One
    visitor's picture is never answered from another's result (no timing oracle between visitors)."""
    if visitor is None or digest in example_digests():
        return ""
    return visitor if isinstance(visitor, str) else str(visitor.session or visitor.client)
