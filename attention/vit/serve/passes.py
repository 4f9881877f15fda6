"""The server's store of forward passes (`PASSES`), the forward that makes one, query and layer carried across.

A `Pass` is one forward pass of one image through one model at one resolution, with every
layer's q, k and v kept (v: for `stepwise`). Changing the layer, view, head, threshold, opacity or colormap, or the
query patch, reuses it: a new query is one row per layer from the kept q/k, rollout is
computed once per (query, layer).

What visitors share and what they do not: the loaded models are shared by everyone (read-only).
`PASSES` is one store for the whole server, every visitor's passes in one byte budget, with a
bound on each visitor's share. A pass of a shipped example is keyed without a visitor, so every
visitor who looks at that example gets the same `Pass` (its memos of queries and rollouts are
guarded by a lock; nothing in it is a visitor's own). A pass of a picture a visitor sent is keyed
to that visitor (`pass_key`): no one else gets it, nor can time whether someone sent it. A
visitor's own state holds only a `Ref` (the key and the shape), never a pass.

    p = get_pass("cat.jpg", "mnist_vit", "auto")                 # a `pass_memo.Pass` of a script, kept nowhere
    p = served_pass("cat.jpg", "mnist_vit", "auto", visitor=sid)   # the server's: from PASSES, computed once
    res = p.at(query=(2, 3), layer=-1)                             # AttentionMaps for patch (2, 3)
    roll = p.rollout((2, 3), layer=-1)                             # (gh, gw)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np

from attention.config import SETTINGS
from attention.crowd.admission import Lane
from attention.crowd.cache import SharedCache
from attention.crowd.visitors import Visitor
from attention.errors import InputError
from attention.images import ImageSource
from attention.vit.engine import features
from attention.vit.engine.extract import AttentionMaps, attention_maps
from attention.vit.engine.query import Query
from attention.vit.engine.request import RESOLUTION
from attention.vit.models.loader import check_allowed, is_loaded, load_vit
from attention.vit.models.registry import REGISTRY
from attention.vit.serve.gpu import gpu
from attention.vit.serve.inputs import file_digest, source_stamp, visitor_scope
from attention.vit.serve.pass_memo import Pass, PassKey, Ref  # noqa: F401  (read through this module too)

Progress = Callable[[float, str], None]  # (fraction 0..1, description)


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


def pass_key(
    image: ImageSource,
    model: str,
    resolution: int | str | None,
    visitor: str | Visitor | None = None,
    digest: str | None = None,
) -> PassKey:
    """What identifies a forward pass: image content, model name, resolution and, for a picture that is
    not a shipped example, the visitor's session (None: nobody in particular, as a script or the command line).
    digest: `image`'s content digest when already known (`known_digest`), else it is computed."""
    digest = file_digest(image) if digest is None else digest
    scope = visitor_scope(digest, visitor)
    return digest, (model or "").strip(), str(resolution).strip().lower(), scope


def get_pass(
    image: ImageSource | None,
    model: str,
    resolution: int | str | None = RESOLUTION,
    *,
    progress: Progress | None = None,
    query: Query | None = None,
    keep_qk: bool = True,
    cache: SharedCache[Pass] | None = None,
    shared: bool = False,
    visitor: str | Visitor | None = None,
    digest: str | None = None,
) -> Pass:
    """The Pass of (image, model, resolution): the one `cache` keeps under its key, else a new forward.

    query, keep_qk: the token whose rows the forward records, and whether it keeps every layer's
    q/k. The defaults suit a visitor's tab (any query, rollout, later). A one-off request that knows its
    query and needs no rollout passes `query=` and `keep_qk=False`: the pass is then cheaper, and
    it answers only that query (`Pass.at` of another raises InputError).

    cache: a server's store of passes (`PASSES`): a full pass of the same key is taken from it (a
    one-query request too), and a new full pass is computed once however many visitors ask at
    once, then kept there; a one-query pass is never kept. None: a new forward every call (a script).
    progress: told (fraction, description) before a new forward and after it.
    shared: see `forward` (model allow-list and compute budget).
    digest: the image's content digest when the caller knows it (`known_digest`): not hashed again.
    visitor: who asks (a session id, or a `Visitor`: session and client address). A picture that is not a
    shipped example is then theirs alone: its
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
    key = pass_key(image, model, resolution, visitor, digest)
    if cache is not None and (kept := cache.get(key)) is not None:
        return kept

    def compute() -> Pass:
        if progress is not None:
            progress(0.05, f"Loading {model}…" if not is_loaded(model) else f"Running {model}…")
        res, device, tokens = forward(model, image, resolution, query, keep_qk, shared)
        if progress is not None:
            progress(0.9, "Rendering…")
        return Pass(key=key, model=model, base=res, device=device, tokens=tokens)

    who = visitor if isinstance(visitor, Visitor) else Visitor(visitor)
    with FORWARDS.turn(who) if shared and who.keys else contextlib.nullcontext():  # a forward: the visitor's turn
        if cache is None or not keep_qk:
            return compute()
        return cache.get_or_run(key, compute, owner=pass_owner(key, visitor))


FORWARDS = Lane(
    "forward",
    slots=SETTINGS.concurrency,
    queued=SETTINGS.visitor_jobs,
    address_queued=SETTINGS.address_waiting,
    max_waiting=SETTINGS.queue_waiting,
    bound_s=60.0,
    typical_s=0.5,
)
"""Forward passes (`attention.crowd.admission`): one of each session and one of each client address computing
at a time, the others of that address waiting their turn (the jobs that reach it are the ones Gradio's queue
started: admitted and ordered there, `attention.ui.common.fair_queue`); the server's ATTENTION_CONCURRENCY slots shared
round-robin between addresses, then between an address's sessions. A forward's time is bounded by the compute
budget (ATTENTION_MAX_GFLOP_CPU/GPU)."""


def pass_owner(key: PassKey, visitor: str | Visitor | None) -> str | tuple[str, str]:
    """Whom a kept pass is charged to in the store: "examples" for a shared one; else its scope (the session),
    paired with the visitor's client address when known, so that an address's sessions share one bound
    (ATTENTION_STATE_ADDRESS_MB) besides each session's own (`SharedCache`'s groups)."""
    if not key[3]:
        return "examples"
    if isinstance(visitor, Visitor) and visitor.client:
        return visitor.turn_key, key[3]  # the address's counter ("c:<address>"), as the lanes count it
    return key[3]


def known_digest(state: Ref | None, image: ImageSource | None) -> str | None:
    """The content digest `state`'s key holds when `image` is the very file the state was made from
    (same `inputs.source_stamp`: path, size, modification time, inode), else None (hash it again)."""
    if state is None or state.source is None:
        return None
    return state.key[0] if source_stamp(image) == state.source else None


PASSES: SharedCache[Pass] = SharedCache(**SETTINGS.pass_store())
"""The server's passes, every visitor's together (`Settings.pass_store`): ATTENTION_STATE_MB, one
visitor's (or the shared examples') at most ATTENTION_STATE_VISITOR_MB, one client address's sessions together
at most ATTENTION_STATE_ADDRESS_MB (`pass_owner`), their own least recently used out first; when full, the least
recently used of the address (or owner) holding most goes; an idle address's cut to ATTENTION_STATE_IDLE_MB;
each dropped after ATTENTION_STATE_TTL seconds unused. A dropped pass is recomputed when its visitor next needs it."""


def served_pass(
    image: ImageSource | None, model: str, resolution: int | str | None, visitor: str | Visitor | None, **options
) -> Pass:
    """`get_pass` as the server answers a visitor: from the server's store (`PASSES`), within the model
    allow-list, the compute budget and the visitor's turn and share (`shared=True`, `visitor`).
    options: `get_pass`'s own (query, keep_qk, progress, digest), passed on as they are."""
    return get_pass(image, model, resolution, cache=PASSES, shared=True, visitor=visitor, **options)


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
