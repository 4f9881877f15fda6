"""One visitor's view of a ViT: the last forward pass, queries on it, and the start-up model choice.

A `Pass` is one forward pass of one image through one model at one resolution, with every
layer's q and k kept. Changing the layer, view, head, threshold, opacity or colormap, or the
query patch, reuses it: a new query is one row per layer from the kept q/k, rollout is
computed once per (query, layer). An app keeps one Pass per visitor (Gradio: a `gr.State`);
nothing in a Pass is shared between visitors, only the loaded models are (read-only).

    p = get_pass("cat.jpg", "mnist_vit", "auto")           # forward pass
    p = get_pass("cat.jpg", "mnist_vit", "auto", p)        # same key: the same Pass, no forward
    res = p.at(query=(2, 3), layer=-1)                # AttentionMaps for patch (2, 3)
    roll = p.rollout((2, 3), layer=-1)                # (gh, gw)
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attention.cache import SharedCache
from attention.config import EXAMPLES_DIR, SETTINGS
from attention.errors import InputError, as_whole
from attention.images import ImageSource
from attention.turns import Turns
from attention.vit import features
from attention.vit.extract import AttentionMaps, attention_maps
from attention.vit.flow import rollout_map
from attention.vit.models import (
    OFFLINE_MODEL,
    REGISTRY,
    available,
    check_allowed,
    hub_id,
    is_loaded,
    load_vit,
)
from attention.vit.query import Query, from_fields, is_empty, parse  # noqa: F401 (is_empty: for the UI)
from attention.vit.query import default as default_query

Progress = Callable[[float, str], None]  # (fraction 0..1, description)


# ZeroGPU gives shorter requests priority, so the duration fits the measured work (bench/bench_gpu.py,
# H100): a pass at 480 px takes 5 ms (ViT-S/16) to 7 ms (ViT-B/8, fp16), 40-230 ms with q/k kept; the
# longest pass the GPU budget admits (40,000 GFLOP) 1.5 s. The rest is the first load of a model's
# weights from the local cache onto the GPU (seconds), once per model and process.
GPU_SECONDS = 20


def gpu(fn: Callable | None = None, *, duration: int = GPU_SECONDS):
    """`spaces.GPU(duration=...)` when the `spaces` package is importable (ZeroGPU), else a no-op.

    Use as `@gpu` or `@gpu(duration=120)` on functions that run a model.
    """
    try:
        import spaces  # type: ignore[import-not-found]
    except ImportError:
        spaces = None

    def wrap(f: Callable) -> Callable:
        return spaces.GPU(duration=duration)(f) if spaces is not None else f

    return wrap(fn) if fn is not None else wrap


@dataclass(frozen=True)
class Startup:
    """The model the app starts with and, when it is not the default, a notice saying why."""

    model: str
    default_available: bool
    notice: str | None


def startup_model(default: str | None = None, fallback: str = OFFLINE_MODEL) -> Startup:
    """Pick the start-up model cheaply: `default` (default: `models.DEFAULT_MODEL` now, which the
    operator's own checkpoint may have become) when its weights are cached or the hub is reachable
    (one short connect, none at all under HF_HUB_OFFLINE=1), else `fallback`."""
    from attention.vit import models

    default = default or models.DEFAULT_MODEL
    if available(default):
        return Startup(default, True, None)
    repo = hub_id(default)
    spec = REGISTRY.get(fallback)
    what = spec.description.split(" (")[0] if spec else fallback
    return Startup(
        fallback,
        False,
        f"Offline: the weights of {default} ({repo}) are not in the local Hugging Face cache and the hub "
        f"cannot be reached, so the app starts with {fallback} ({what}) and digit examples. "
        f"Any model whose weights are cached still works: pick it in the Model box.",
    )


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


@functools.cache
def example_files() -> dict[str, Path]:
    """Every shipped example image by name (file name without extension): photos and digits."""
    return {p.stem: p for d in ("photos", "digits") for p in sorted((EXAMPLES_DIR / d).glob("*.*"))}


@functools.cache
def example_digests() -> dict[str, str]:
    """Content digest -> name of every shipped example image (`example_files`)."""
    return {file_digest(str(p)): name for name, p in example_files().items()}


def parse_query(row: float | int | None, col: float | int | None, token: str | None = None) -> Query | None:
    """(row, col) numbers -> a query (`query.from_fields`): both empty (None or NaN) means `token`,
    None = the model's own (`Pass.default_query`), else a patch (int, int).

    Raises InputError when only one is given or a value is not a whole number.
    """
    return from_fields(row, col, token)


def parse_index(value: float | int | str, what: str = "Layer") -> int:
    """A whole number (layer or head index; negative counts from the end). InputError otherwise."""
    v = as_whole(value)
    if v is None:
        raise InputError(f"{what} {value!r} is not a whole number; accepted: 0, 1, 2, ... or -1 for the last.")
    return v


@gpu
def forward(
    model: str,
    image: ImageSource,
    resolution: int | str | None,
    query: Query | None = None,
    keep_qk: bool = True,
    shared: bool = False,
) -> tuple[AttentionMaps, str, np.ndarray]:
    """One forward pass of `image` through `model` (rows of `query`, q/k kept unless told not to),
    the device it ran on, and the tokens every block output (float16 (L, N, d), `features`).
    shared: as a server for many visitors, so only models they may load
    (`models.check_allowed`) and within the device's compute budget (`SETTINGS.budget_gflop`)."""
    if shared:
        check_allowed(model)
    vit = load_vit(model)
    device = str(next(vit.parameters()).device)
    with features.recording(vit) as rec:  # the same pass records every block's output tokens
        res = attention_maps(
            vit,
            image,
            resolution=resolution,
            query=query,
            keep_qk=keep_qk,
            max_gflop=SETTINGS.budget_gflop(device) if shared else None,
        )
    return res, device, rec.tokens


def depth(model: str) -> tuple[int, int]:
    """(layers, heads) of `model`, loading it once if needed (cached; no forward pass)."""
    vit = load_vit(model)
    return len(vit.blocks), int(vit.blocks[0].attn.num_heads)


@dataclass
class Pass:
    """A cached forward pass (see the module docstring). `base` has the model's default query
    (`query.default`: CLS, else the pooling head's, else the centre patch) and q/k kept."""

    key: PassKey
    model: str
    base: AttentionMaps
    device: str
    tokens: np.ndarray | None = field(default=None, repr=False)  # float16 (L, N, d): every block's output
    _queries: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _rollouts: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # the memos are shared

    MEMO = 8  # queries and rollouts remembered per pass

    @property
    def ref(self) -> Ref:
        """What a visitor's state keeps of this pass: its key and shape (the pass lives in a PassCache)."""
        return Ref(self.key, self.base.grid, self.num_layers, self.num_heads)

    @property
    def nbytes(self) -> int:
        """Bytes this pass can hold: kept q/k (and bias, the pool's q/k), the block outputs, its rows,
        the image, full memos of queries and rollouts."""
        b = self.base
        qk = sum(q.nbytes + k.nbytes for q, k in b.qk or [])
        qk += sum({id(m): m.nbytes for m in b.bias or [] if m is not None}.values())  # relative-position bias
        qk += sum(t.nbytes for t in (b.pool_qk or ())[:2])
        rows = b.scores.nbytes + b.weights.nbytes
        tokens = 0 if self.tokens is None else self.tokens.nbytes
        return (
            qk
            + tokens
            + rows * (1 + self.MEMO)
            + b.image.width * b.image.height * 3
            + self.MEMO * b.weights.shape[-1] * 4
        )

    @property
    def num_layers(self) -> int:
        return self.base.depth

    @property
    def num_heads(self) -> int:
        return self.base.weights.shape[1]

    @property
    def query_tokens(self) -> list[str]:
        """The named queries the model has (`query.tokens_of`): what a query picker offers besides patches."""
        return [*self.base.tokens, *(["pool"] if self.base.pool else [])]

    @property
    def default_query(self) -> Query:
        """The query an empty query means for this model (`query.default`)."""
        return default_query(self.query_tokens, self.base.grid)

    def at(self, query: Query | None = None, layer: int = -1) -> AttentionMaps:
        """The pass seen from `query` (None: `default_query`) at `layer` (no new forward). Raises
        InputError off the grid/depth, or for a token the model lacks (naming what it has)."""
        q = self.default_query if query is None else parse(query)
        self.base.index_of(q)  # a token the model lacks: refused before anything is memoised
        with self._lock:
            if q not in self._queries:
                self._queries[q] = self.base if q == self.base.query else self.base.requery(q)
                while len(self._queries) > self.MEMO:
                    self._queries.popitem(last=False)
            res = self._queries[q]
        return res.at_layer(layer)

    def feature_maps(
        self, query: Query | None = None, layer: int = -1, background: float | None = None, pca_style: str = "minmax"
    ) -> dict[str, np.ndarray]:
        """float32 pca (gh, gw, 3), similarity to `query` (gh, gw) and norms (gh, gw) of layer `layer`'s
        output tokens (`features.feature_maps`: pca_style, background), from this pass. InputError off the
        depth or grid."""
        if self.tokens is None:
            raise InputError("This pass kept no features; run it again through `get_pass`.")
        b = self.base
        i = b.index_of(self.default_query if query is None else query)
        if i < 0:
            raise InputError("The pooling head's query is not a token of the blocks: it has no features to compare.")
        return features.feature_maps(self.tokens, b.grid, b.num_prefix_tokens, layer, i, background, pca_style)

    def rollout(self, query: Query | None = None, layer: int = -1, **options) -> np.ndarray:
        """float32 (gh, gw): attention rollout of `query` through layers 0..layer, memoised.
        options: `flow.rollout`'s head_fusion ("mean", "max", "min"), discard_ratio, discard ("row", "global")."""
        res = self.at(query, layer)
        key = (res.query, res.layer, tuple(sorted(options.items())))
        with self._lock:
            if key not in self._rollouts:
                self._rollouts[key] = rollout_map(res, **options)
                while len(self._rollouts) > self.MEMO:
                    self._rollouts.popitem(last=False)
            return self._rollouts[key]


PassKey = tuple[str, str, str, str]
"""(image digest, model, resolution, scope): scope "" for a shipped example (one pass shared by every
visitor), else the visitor who sent the picture (theirs alone, so no visitor can time whether someone
else sent it)."""


def pass_key(image: ImageSource, model: str, resolution: int | str | None, visitor: str | None = None) -> PassKey:
    """What identifies a forward pass: image content, model name, resolution and, for a picture that is
    not a shipped example, the visitor (None: nobody in particular, as a script or the command line)."""
    digest = file_digest(image)
    scope = "" if visitor is None or digest in example_digests() else str(visitor)
    return digest, (model or "").strip(), str(resolution).strip().lower(), scope


def get_pass(
    image: ImageSource | None,
    model: str,
    resolution: int | str | None = "auto",
    previous: Pass | None = None,
    progress: Progress | None = None,
    *,
    query: Query | None = None,
    keep_qk: bool = True,
    cache: SharedCache[Pass] | None = None,
    shared: bool = False,
    visitor: str | None = None,
) -> Pass:
    """The Pass of (image, model, resolution): `previous` when it has that key, else a new forward.

    query, keep_qk: the token whose rows the forward records, and whether it keeps every layer's
    q/k. The defaults suit a session (any query, rollout, later). A one-off request that knows its
    query and needs no rollout passes `query=` and `keep_qk=False`: the pass is then cheaper, and
    it answers only that query (`Pass.at` of another raises InputError).

    cache: a server's store of passes (`PASSES`): a full pass of the same key is taken from it (a
    one-query request too), and a new full pass is computed once however many visitors ask at
    once, then kept there. shared: see `forward` (model allow-list and compute budget).
    visitor: who asks (a session id). A picture that is not a shipped example is then theirs alone: its
    pass is keyed and charged to them (`pass_key`; the store bounds each visitor's share), so another
    visitor sending the same bytes gets a pass of their own. Examples stay shared, charged to "examples".

    Raises InputError when there is no image, and the engine's typed errors (ImageError,
    ModelLoadError, InputError) for bad images, models and resolutions.
    """
    if image is None or (isinstance(image, str) and not image):
        raise InputError("No image: upload one (PNG, JPEG, WebP, GIF, BMP or TIFF) or pick an example.")
    model = (model or "").strip()
    if not model:
        raise InputError(f"No model given; accepted: {', '.join(REGISTRY)}, a timm ViT name or 'hf-hub:org/repo'.")
    key = pass_key(image, model, resolution, visitor)
    if (
        previous is not None
        and previous.key == key
        and (
            previous.base.qk is not None or (not keep_qk and query is not None and previous.base.query == parse(query))
        )
    ):
        return previous
    if cache is not None and (kept := cache.get(key)) is not None:
        return kept

    def compute() -> Pass:
        if progress is not None:
            progress(0.05, f"Loading {model}…" if not is_loaded(model) else f"Running {model}…")
        res, device, tokens = forward(model, image, resolution, query, keep_qk, shared)
        if progress is not None:
            progress(0.9, "Rendering…")
        return Pass(key=key, model=model, base=res, device=device, tokens=tokens)

    with FORWARDS.hold(visitor if shared else None):  # a forward is needed: within the visitor's turn
        if cache is None or not keep_qk:
            return compute()
        return cache.get_or_run(key, compute, owner=key[3] or "examples")


FORWARDS = Turns(SETTINGS.concurrency - 1)
"""Forward passes of one visitor at once: one fewer than the jobs the server computes at once
(ATTENTION_CONCURRENCY), at least 1."""


def _answers(previous: Pass, keep_qk: bool, query: Query | None) -> bool:
    """Whether a one-query pass without q/k answers a request for `query` (without q/k)."""
    return not keep_qk and query is not None and previous.base.query == parse(query)


@dataclass(frozen=True)
class Ref:
    """A visitor's handle on their pass: a few bytes in their session; the pass itself is in a
    SharedCache, whose byte budget bounds every visitor's passes together."""

    key: PassKey
    grid: tuple[int, int]
    num_layers: int
    num_heads: int


PASSES: SharedCache[Pass] = SharedCache(**SETTINGS.pass_store())
"""The server's passes, every visitor's together (`Settings.pass_store`): ATTENTION_STATE_MB, one
visitor's (or the shared examples') at most ATTENTION_STATE_VISITOR_MB, their own least recently used
out first; when full, the least recently used of whoever holds most goes; an idle visitor's cut to
ATTENTION_STATE_IDLE_MB; each dropped after ATTENTION_STATE_TTL seconds unused. A dropped pass is
recomputed when its visitor next needs it."""


def map_query(query: Query | None, src: tuple[int, int], dst: tuple[int, int]) -> Query | None:
    """The patch of grid `dst` (rows, cols) under the centre of `query`'s patch on grid `src`
    (same image, another model or resolution); a token name or None as it is."""
    if query is None or isinstance(query, str):
        return query
    (r, c), (gh, gw), (dh, dw) = query, src, dst
    return (min(dh - 1, int((r + 0.5) / gh * dh)), min(dw - 1, int((c + 0.5) / gw * dw)))


def map_layer(layer: int, n_src: int, n_dst: int) -> int:
    """The layer of a model with `n_dst` layers at the same relative depth as `layer` of `n_src`."""
    layer = layer % n_src
    return 0 if n_src == 1 else int(round(layer * (n_dst - 1) / (n_src - 1)))
