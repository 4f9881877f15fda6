"""Vision transformers to inspect: `load_vit` with its cache of loaded models, the device, and the
allow-list of a shared server.

Weights come through timm (`pretrained=True`) and huggingface-hub, so the HF cache,
`HF_HOME` and `HF_HUB_OFFLINE` are honoured exactly as in any timm program. The one
exception is `mnist_vit`, a small ViT trained here whose weights ship in `weights/`
(where the weights come from is `sources`; the registry, data only, `registry`).

    model = load_vit("dino_vits16")          # timm vit_small_patch16_224.dino, cached
    model = load_vit("mnist_vit")            # no network needed
    model = load_vit("hf-hub:timm/vit_small_patch14_reg4_dinov2.lvd142m")
"""

from __future__ import annotations

import os
import sys
import threading
import types
from collections import OrderedDict

import torch

from attention.config import SETTINGS
from attention.crowd import net
from attention.errors import ModelLoadError
from attention.vit.models import posembed
from attention.vit.models.registry import (
    FAMILIES,
    REGISTRY,
    ModelSpec,
    default_model,
    family_of,
    set_default_model,
)
from attention.vit.models.sources import is_cached, resolve


class _Module(types.ModuleType):
    """This module, with `DEFAULT_MODEL` read (and set) through `default_model()` / `set_default_model()`,
    never a value bound once at import."""

    @property
    def DEFAULT_MODEL(self) -> str:  # noqa: N802 (the public name kept for callers and the README)
        return default_model()

    @DEFAULT_MODEL.setter
    def DEFAULT_MODEL(self, name: str) -> None:  # noqa: N802
        set_default_model(name)


sys.modules[__name__].__class__ = _Module

_cache: OrderedDict[tuple[str, str, str], torch.nn.Module] = OrderedDict()  # least recently used first
_lock = threading.Lock()  # guards _cache and _loading; held only for look-ups, never during a load
_loading: dict[tuple[str, str, str], threading.Lock] = {}  # key -> the lock of its load in progress


def default_device() -> torch.device:
    """CUDA when there is a GPU, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def default_dtype(device: torch.device) -> torch.dtype:
    """float16 on CUDA, float32 elsewhere. Scores and softmax always run in fp32 (`extract.query_scores`).

    float16, not bfloat16: its 10-bit mantissa (bf16 has 7) keeps the maps close to fp32's. Measured on
    an H100 (torch 2.11), |w - w_fp32| / head peak over layers and heads, random peaked weights:
    bench/bench_gpu.py, ViT-S/16 at 480 px: fp16 max 0.70% median 0.30%, bf16 max 5.8% median 2.5%
    (issue 11 quotes 0.27% vs 2.4%); through load_vit with the DINO/DINOv2/DINOv2-reg fixtures of
    tests/vit/engine/test_fidelity.py at 500x375 native and auto: fp16 max 0.8-1.2% median 0.33-0.40%, peak
    patch the same in 97-100% of heads; bf16 max 7-10% median 2.5-3.5%, 87-96%. Re-measure with
    `python -m bench.bench_gpu` on the target GPU before changing it.
    """
    return torch.float16 if device.type == "cuda" else torch.float32


def default_resolution(model: torch.nn.Module) -> int:
    """What `resolution="auto"` means for `model`: 480 px for DINO, else its trained input size."""
    from attention.vit.backbone import describe

    return describe(model).default_resolution


def load_vit(
    name: str | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    *,
    arch: str | None = None,
    checkpoint_key: str | None = None,
    family: str | None = None,
) -> torch.nn.Module:
    """A timm VisionTransformer with pretrained weights, in eval mode on `device`.

    name: an alias of REGISTRY, a timm ViT name, or `hf-hub:org/repo` (None: `default_model()`, read at the
    call); the path of a model folder (a transformers save_pretrained folder, an open_clip one: `folder`; a
    name that resolves wins over a folder of the same name; `family` as for a checkpoint); with `arch`, the
    path of your own checkpoint (.pth/.pt/.bin/.safetensors) for timm architecture `arch` (`checkpoint.load`: DINO's
    `teacher`/`student` keys, `module.`/`backbone.` prefixes; `checkpoint_key` picks the key; `family`,
    default the architecture's, how images are fed: a key of FAMILIES).
    device: default CUDA when available, else CPU. dtype: default `default_dtype(device)`.
    Loaded once per (name, device, dtype) and cached; at most `SETTINGS.max_models`
    (ATTENTION_MAX_MODELS) stay resident, the least recently used is dropped first
    (a caller still holding it keeps it working). Thread-safe. Accepts any image size
    (position embeddings are interpolated per input: `dynamic_img_size=True`), the way the
    model's family does it (`FAMILIES`, inferred from the name when it is not in REGISTRY);
    `model.crop_rule` says how its family crops an image to the patch grid.

    Raises ModelLoadError naming the model id, the cause and the fix when weights
    cannot be had (offline and not cached, hub error, unknown name, not a ViT).
    Never falls back to random weights.
    """
    name = default_model() if name is None else name
    if arch is not None:
        from attention.vit.models.checkpoint import checkpoint_spec

        timm_name, spec = arch, checkpoint_spec(name, arch, checkpoint_key, family)
    else:
        timm_name, spec = _resolve_or_folder(name, family)
    device = torch.device(device) if device is not None else default_device()
    dtype = dtype or default_dtype(device)
    key = (_cache_name(timm_name, spec), str(device), str(dtype))
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
        loading = _loading.setdefault(key, threading.Lock())
    with loading:  # one load per key, even when two visitors ask at once; other keys load meanwhile
        with _lock:
            if key in _cache:
                _cache.move_to_end(key)
                return _cache[key]
        try:
            model = _build(timm_name, spec, device, dtype)
        finally:
            with _lock:
                _loading.pop(key, None)
        with _lock:
            _cache[key] = model
            while len(_cache) > max(1, SETTINGS.max_models):
                _cache.popitem(last=False)
            return model


def _resolve_or_folder(name: str | os.PathLike, family: str | None) -> tuple[str, ModelSpec | None]:
    """`resolve(name)`, else, for a name nothing resolves, the model folder at that path (`folder.folder_spec`):
    a registry alias or a model name always wins over a folder of the same name."""
    from attention.vit.models.folder import folder_spec

    if not isinstance(name, os.PathLike):
        try:
            return resolve(name)
        except ModelLoadError:
            spec = folder_spec(name, family) if name else None
            if spec is None:
                raise
            return spec.timm_name, spec
    spec = folder_spec(name, family)
    if spec is None:
        from attention.vit.backbone.load import load_folder

        load_folder(name)  # ModelLoadError saying what a model folder is
    return spec.timm_name, spec


def _build(timm_name: str, spec: ModelSpec | None, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    """The model of `timm_name` loaded (`_load`) and set up to serve: its family's crop and position
    embeddings, its "auto" resolution, on `device` in `dtype`, in eval mode without gradients."""
    model = _load(timm_name, spec)
    rule = FAMILIES[spec.family if spec else family_of(timm_name)]
    auto = spec.resolution if spec else rule.resolution
    if auto:
        model.auto_resolution = auto
    model.alias, model.crop_rule, model.resize_rule = spec.alias if spec else timm_name, rule.crop, rule.resize
    if rule.mean is not None and hasattr(model, "pretrained_cfg"):  # the family's own normalisation (timm),
        # whatever the architecture's tag says (other libraries' repos carry their own: `backbone.load`)
        model.pretrained_cfg = {**model.pretrained_cfg, "mean": rule.mean, "std": rule.std}
    model = model.to(device=device, dtype=dtype).eval().requires_grad_(False)
    if "text_model" in model.__dict__:  # an image tower: its model's text tower goes with it
        model.text_model.to(device=device, dtype=dtype).eval().requires_grad_(False)
    from attention.vit.backbone import describe

    if describe(model).library != "timm":  # other libraries resample positions by their own code
        return model
    return posembed.install(model, rule.pos_embed)


def _load(timm_name: str, spec: ModelSpec | None) -> torch.nn.Module:
    """The model with its weights from where they are: shipped, the operator's checkpoint, or the hub."""
    from attention.vit.models import sources, weights

    if spec and spec.text and spec.timm_name == "local":
        from attention.vit.text.load import load_shipped

        return load_shipped(spec.alias)
    if spec and spec.checkpoint and timm_name.startswith("open_clip:"):  # one's own open_clip checkpoint file
        from attention.vit.backbone.load import load_open_clip_checkpoint

        return load_open_clip_checkpoint(spec.checkpoint, timm_name, spec.checkpoint_key)
    if timm_name.startswith("open_clip:"):  # the image tower with its text tower (`text.load`)
        from attention.vit.text.load import load_open_clip

        return load_open_clip(timm_name)
    if timm_name.startswith("hf:"):
        from attention.vit.backbone.load import load_named

        return load_named(timm_name)
    if spec and spec.timm_name == "local":
        return weights.load_local(spec.alias)
    if spec and spec.timm_name.startswith("folder:"):  # a transformers or open_clip folder (`folder`)
        from attention.vit.backbone.load import load_folder

        return load_folder(spec.checkpoint)
    if spec and spec.checkpoint:
        from attention.vit.models import checkpoint

        model = checkpoint.load(spec.checkpoint, spec.timm_name, spec.checkpoint_key)
        return weights.check_vit(model, spec.timm_name)
    return sources.load_hub(timm_name)


def _cache_name(timm_name: str, spec: ModelSpec | None) -> str:
    """Everything that determines the loaded model: for a checkpoint its alias, architecture, key, family,
    path and the file's identity (device, inode, size, modification time: the next epoch's file written
    over the last is another model); else the alias or timm name."""
    if spec and spec.checkpoint:
        from attention.vit.backbone.load import weights_file

        try:
            st = os.stat(weights_file(spec.checkpoint) if os.path.isdir(spec.checkpoint) else spec.checkpoint)
            ident = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"
        except OSError:
            ident = "missing"  # the load says what is wrong
        return f"{spec.alias}|{spec.timm_name}|{spec.checkpoint_key}|{spec.family}|{spec.checkpoint}|{ident}"
    return spec.alias if spec else timm_name


def is_loaded(name: str) -> bool:
    """True when `name` is already loaded (on any device): `load_vit` will not load it again.
    False for unknown names."""
    try:
        cname = _cache_name(*resolve(name))
    except ModelLoadError:
        return False
    return any(k[0] == cname for k in list(_cache))


def check_allowed(name: str, allow_downloads: bool | None = None) -> str:
    """Whether a visitor of a shared server may use `name`: a registry model, or one whose weights
    are already on disk; any other only when downloads are allowed (ATTENTION_ALLOW_DOWNLOADS=1).
    Returns the stripped name; raises ModelLoadError saying what is accepted otherwise."""
    name = (name or "").strip()
    _, spec = resolve(name)
    allow = SETTINGS.allow_downloads if allow_downloads is None else allow_downloads
    if spec is not None or allow or is_cached(name):
        return name
    raise ModelLoadError(
        f"Model {name!r} is not offered by this server; accepted: {', '.join(REGISTRY)}, or a model whose weights "
        "are already in its cache (downloads of other models are off: ATTENTION_ALLOW_DOWNLOADS=1 turns them on)."
    )


def depth(name: str) -> tuple[int, int]:
    """(layers, heads) of model `name`, loading it once if needed (cached; no forward pass)."""
    from attention.vit.backbone import describe

    bb = describe(load_vit(name))
    return bb.depth, bb.heads


def clear_cache() -> None:
    """Forget every loaded model (tests; freeing memory)."""
    with _lock:
        _cache.clear()
    net.forget()
