"""Vision transformers to inspect: the alias registry, whether a model's weights are at hand,
`load_vit` with its cache of loaded models, the device, and the allow-list of a shared server.

Weights come through timm (`pretrained=True`) and huggingface-hub, so the HF cache,
`HF_HOME` and `HF_HUB_OFFLINE` are honoured exactly as in any timm program. The one
exception is `mnist_vit`, a small ViT trained here whose weights ship in `weights/`
(the loading from either source is `attention.vit.weights`).

    model = load_vit("dino_vits16")          # timm vit_small_patch16_224.dino, cached
    model = load_vit("mnist_vit")            # no network needed
    model = load_vit("hf-hub:timm/vit_small_patch14_reg4_dinov2.lvd142m")
"""

from __future__ import annotations

import os
import re
import sys
import threading
import types
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlparse

import torch

from attention.config import SETTINGS, WEIGHTS_DIR
from attention.errors import ModelLoadError
from attention.serving import net
from attention.vit import posembed


@dataclass(frozen=True)
class Family:
    """How a family's own code feeds an image of any size to its ViT, so our maps are its maps.

    crop: which part of the image is kept when its size is not a multiple of the patch ("resize":
    none, the image is resized to whole patches instead: `images.target_size`).
    pos_embed: how position embeddings are resampled to the patch grid (`posembed.RULES`, or
    "rope": rotary, nothing to resample).
    resolution: what "auto" means (shorter side, px; the height for "resize"), None = the model's
    trained input size.
    resize: the filter of every resize (`images.RESIZES`): "bilinear", torchvision's `Resize` on a PIL
    image as DINO's visualize_attention.py and DINOv3's notebooks run it; "bicubic", timm's.
    mean, std: the normalisation of the family's own code, or None: the model's pretrained_cfg's (timm).
    """

    crop: Literal["top-left", "center", "resize"]
    pos_embed: Literal["dino", "dinov2", "dinov2_reg", "timm", "rope"]
    resolution: int | None
    resize: Literal["bilinear", "bicubic"] = "bicubic"
    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None


# The rule, in one place. DINO's visualize_attention.py crops `img[:, :w - w % p, :h - h % p]`
# (the top-left corner; its default --image_size is (480, 480): our "dino480"); its ViT resamples position
# embeddings with interpolate_pos_encoding (facebookresearch/dino vision_transformer.py). DINOv2 has
# no script of its own: people run DINO's, so the same crop, with DINOv2's interpolate_pos_encoding
# and the settings of its hub models (see posembed.RULES). DINOv3's notebooks (facebookresearch/dinov3
# notebooks/pca.ipynb and foreground_segmentation.ipynb, `resize_transform`, IMAGE_SIZE = 768) resize
# the whole image, no crop, to 768 px high (48 rows of patches) and floor(w * 768 / (h * 16)) columns,
# bilinear; its positions are rotary (timm `Eva` with RotaryEmbeddingDinoV3), so nothing is resampled;
# "auto" is those notebooks' 768. Any other ViT is fed as timm feeds it (centre crop, timm's
# resampling). mnist_vit sees 28 x 28 digits, a whole number of patches. The resize: DINO's script runs
# `pth_transforms.Resize(args.image_size)` on a PIL image (bilinear: `--image_size 480` is "auto"), then
# Normalize with ImageNet's mean and std, whatever the checkpoint's tag (DINOv2's hub transforms too);
# DINOv3's notebooks resize bilinear and normalise as its weights' tag says (ImageNet's, or the satellite
# models' own); timm's models keep their pretrained_cfg's (bicubic, their own mean and std).
IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
FAMILIES: dict[str, Family] = {
    "dino": Family("top-left", "dino", 480, "bilinear", *IMAGENET),
    "dinov2": Family("top-left", "dinov2", 480, "bilinear", *IMAGENET),
    "dinov2_reg": Family("top-left", "dinov2_reg", 480, "bilinear", *IMAGENET),
    "dinov3": Family("resize", "rope", 768, "bilinear"),  # its tags' own (lvd1689m: ImageNet's; sat493m: its own)
    "timm": Family("center", "timm", None),
}


def family_of(name: str) -> str:
    """The family of a timm name or `hf-hub:org/repo`, from its name: a DINOv3 name -> "dinov3"; a
    DINOv2 name (with `reg<n>`: registers) -> "dinov2"/"dinov2_reg"; a `dino` tag or word
    (`vit_small_patch16_224.dino`, `..._dino`) -> "dino"; anything else -> "timm"."""
    base = name.strip().lower().removeprefix("hf-hub:").rsplit("/", 1)[-1]
    if "dinov3" in base:
        return "dinov3"
    if "dinov2" in base:
        return "dinov2_reg" if re.search(r"reg\d", base) else "dinov2"
    return "dino" if re.search(r"(^|[._-])dino($|[._-])", base) else "timm"


@dataclass(frozen=True)
class ModelSpec:
    """One entry of the registry: a short alias for a timm tag (or the shipped model)."""

    alias: str
    timm_name: str  # timm tag, or "local" for weights shipped in weights/ (the architecture, for a checkpoint)
    description: str
    resolution: int | None  # what "auto" resolution means for this model (shorter side, px; None: trained size)
    family: str = "timm"  # a key of FAMILIES: how its own code crops and resamples position embeddings
    checkpoint: str | None = None  # the operator's own weights file (`checkpoint.register_checkpoint`)
    checkpoint_key: str | None = None  # where in that file the weights sit (DINO's --checkpoint_key)
    classifier: bool = False  # has a classifier head read from its class token (class relevance: "Why this class?")
    text: bool = False  # has a text tower (CLIP, SigLIP: text relevance, "Find in image"); timm_name "open_clip:..."

    @property
    def hub_id(self) -> str | None:
        if self.timm_name.startswith("open_clip:hf-hub:"):
            return self.timm_name[len("open_clip:hf-hub:") :]
        return None if self.timm_name == "local" or self.checkpoint else f"timm/{self.timm_name}"

    @property
    def crop(self) -> str:
        """The part of an image kept on the patch grid: "top-left" or "center"."""
        return FAMILIES[self.family].crop

    @property
    def pos_embed(self) -> str:
        """The position-embedding resampling rule (a key of `posembed.RULES`)."""
        return FAMILIES[self.family].pos_embed


REGISTRY: dict[str, ModelSpec] = {
    s.alias: s
    for s in [
        ModelSpec("dino_vits16", "vit_small_patch16_224.dino", "DINO ViT-S/16", 480, "dino"),
        ModelSpec("dino_vits8", "vit_small_patch8_224.dino", "DINO ViT-S/8", 480, "dino"),
        ModelSpec("dino_vitb16", "vit_base_patch16_224.dino", "DINO ViT-B/16", 480, "dino"),
        ModelSpec("dino_vitb8", "vit_base_patch8_224.dino", "DINO ViT-B/8", 480, "dino"),
        ModelSpec("dinov2_vits14", "vit_small_patch14_dinov2.lvd142m", "DINOv2 ViT-S/14", 480, "dinov2"),
        ModelSpec(
            "dinov2_vits14_reg",
            "vit_small_patch14_reg4_dinov2.lvd142m",
            "DINOv2 ViT-S/14 with 4 registers",
            480,
            "dinov2_reg",
        ),
        # DINOv3 (timm `Eva`: RoPE, 4 registers), 768 px high as its notebooks; weights under the DINOv3
        # licence (pretrained_cfg license "dinov3-license"), in timm's own ungated hub repos
        ModelSpec("dinov3_vits16", "vit_small_patch16_dinov3.lvd1689m", "DINOv3 ViT-S/16", 768, "dinov3"),
        ModelSpec("dinov3_vits16plus", "vit_small_plus_patch16_dinov3.lvd1689m", "DINOv3 ViT-S+/16", 768, "dinov3"),
        ModelSpec("dinov3_vitb16", "vit_base_patch16_dinov3.lvd1689m", "DINOv3 ViT-B/16", 768, "dinov3"),
        ModelSpec("mnist_vit", "local", "ViT trained here on MNIST digits (ships with the app)", 28, classifier=True),
        ModelSpec("deit_small", "deit_small_patch16_224.fb_in1k", "DeiT-S ImageNet classifier", 224, classifier=True),
        # models with a text tower, through open_clip (attention.vit.text): text relevance, "Find in image"
        ModelSpec(
            "digit_clip", "local", "CLIP trained here on MNIST digits and captions (ships with the app)", 56, text=True
        ),
        ModelSpec("siglip2_vitb16", "open_clip:hf-hub:timm/ViT-B-16-SigLIP2", "SigLIP 2 ViT-B/16", 224, text=True),
        ModelSpec(
            "clip_vitb16",
            "open_clip:hf-hub:timm/vit_base_patch16_clip_224.openai",
            "CLIP ViT-B/16 (OpenAI)",
            224,
            text=True,
        ),
    ]
}
OFFLINE_MODEL = "mnist_vit"
_default = ["dino_vits16"]  # the default model, read through `default_model()`: the operator may change it


def default_model() -> str:
    """The default model's alias now: dino_vits16, or the operator's checkpoint (`python app.py --model
    ckpt.pth`, `register_checkpoint(..., default=True)`). `models.DEFAULT_MODEL` reads it too."""
    return _default[0]


def set_default_model(name: str) -> str:
    """Make the registry entry `name` the default model (`default_model()`, `load_vit()`'s); ModelLoadError
    naming the registry's aliases for any other name. Returns it."""
    name = (name or "").strip()
    if name not in REGISTRY:
        raise ModelLoadError(f"Default model {name!r} is not a registry entry; accepted: {', '.join(REGISTRY)}.")
    _default[0] = name
    return name


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
    tests/vit/test_fidelity.py at 500x375 native and auto: fp16 max 0.8-1.2% median 0.33-0.40%, peak
    patch the same in 97-100% of heads; bf16 max 7-10% median 2.5-3.5%, 87-96%. Re-measure with
    `python -m bench.bench_gpu` on the target GPU before changing it.
    """
    return torch.float16 if device.type == "cuda" else torch.float32


def resolve(name: str) -> tuple[str, ModelSpec | None]:
    """Map an alias, a timm name or `hf-hub:org/repo` to (timm name, registry spec or None).

    Raises ModelLoadError for an empty or unknown name, listing what is accepted.
    """
    name = (name or "").strip()
    if name in REGISTRY:
        spec = REGISTRY[name]
        return spec.timm_name, spec
    for spec in REGISTRY.values():  # a registered timm tag typed in full
        if name == spec.timm_name:
            return name, spec
    if name.startswith("open_clip:"):  # open_clip CLIP/SigLIP with their text tower (`text.load`)
        from attention.vit.text.load import repo_of

        repo_of(name)  # ModelLoadError saying what is accepted
        return name, None
    if name.startswith("hf:"):  # transformers names (`backbone.load`)
        from attention.vit.backbone.load import check_name

        return check_name(name), None
    if name.startswith("hf-hub:") and len(name) > len("hf-hub:"):
        from huggingface_hub.utils import HFValidationError, validate_repo_id

        try:
            validate_repo_id(name[len("hf-hub:") :])
        except HFValidationError:
            raise ModelLoadError(
                f"Model id {name!r} is not a Hugging Face repo id; accepted: 'hf-hub:org/repo' with letters, digits, "
                "'-', '_' and '.' (no '..', no '@revision', no path), e.g. 'hf-hub:timm/vit_small_patch16_224.dino'."
            ) from None
        return name, None
    import timm

    if name and timm.is_model(name):
        arch, _, tag = name.partition(".")
        tags = [t.partition(".")[2] for t in timm.list_pretrained(f"{arch}.*")]
        if tag and tag not in tags:
            raise ModelLoadError(
                f"Model {name!r}: timm has no weights tagged {tag!r} for {arch}; accepted tags: "
                f"{', '.join(tags) or '(none: it has no pretrained weights)'}, e.g. {arch}.{tags[0] if tags else ''}."
            )
        if not timm.models.is_model_in_modules(name, VIT_MODULES):
            raise ModelLoadError(
                f"Model {name!r} is not a plain ViT; attention extraction supports timm ViT models "
                f"({', '.join(VIT_MODULES)}), e.g. {', '.join(REGISTRY)}."
            )
        return name, None
    raise ModelLoadError(
        f"Unknown model {name!r}. Accepted: one of the aliases {', '.join(REGISTRY)}; "
        "a timm ViT name such as 'vit_small_patch16_224.dino'; or 'hf-hub:org/repo'."
    )


FIXED_SIZE = ["beit", "vision_transformer_relpos"]  # relative-position tables for one grid: the trained size
VIT_MODULES = ["vision_transformer", "deit", "eva", "beit", "vision_transformer_relpos"]  # what `resolve` accepts


def default_resolution(model: torch.nn.Module) -> int:
    """What `resolution="auto"` means for `model`: 480 px for DINO, else its trained input size."""
    from attention.vit.backbone import describe

    return describe(model).default_resolution


def hub_id(name: str) -> str | None:
    """The Hugging Face repo id the weights of `name` come from (None for shipped weights)."""
    timm_name, spec = resolve(name)
    if spec is not None:
        return spec.hub_id
    if timm_name.startswith("hf-hub:"):
        return timm_name[len("hf-hub:") :]
    if timm_name.startswith(("hf:", "open_clip:")):
        from attention.vit.backbone.load import hub_repo

        return hub_repo(timm_name)
    import timm

    cfg = timm.models.get_pretrained_cfg(timm_name)
    return cfg.hf_hub_id if cfg is not None else None


def is_cached(name: str) -> bool:
    """True when the weights of `name` are on disk (shipped, or in the HF cache): no network used."""
    repo = hub_id(name)
    if repo is None:  # shipped weights, a checkpoint, or a timm name with no pretrained weights on the hub
        spec = resolve(name)[1]
        if spec is None:
            return False
        return (
            os.path.isfile(spec.checkpoint) if spec.checkpoint else (WEIGHTS_DIR / f"{spec.alias}.safetensors").exists()
        )
    from huggingface_hub import try_to_load_from_cache

    if resolve(name)[0].startswith("open_clip:"):
        from attention.vit.text.load import is_cached as open_clip_cached

        return open_clip_cached(resolve(name)[0])
    files = ("model.safetensors", "pytorch_model.bin", "open_clip_model.safetensors", "open_clip_pytorch_model.bin")
    return any(isinstance(try_to_load_from_cache(repo, f), str) for f in files)


def hub_reachable(timeout: float = 1.5) -> bool:
    """Whether the Hugging Face Hub can be reached: False at once under HF_HUB_OFFLINE=1,
    else one short TCP connect, remembered for a minute (no long time-outs on each request)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    return net.reachable(urlparse(constants.ENDPOINT).hostname or "", 443, timeout=timeout)


def available(name: str) -> bool:
    """True when `load_vit(name)` can get weights now (cached, shipped, or the hub reachable)."""
    try:
        return is_cached(name) or (hub_id(name) is not None and hub_reachable())
    except ModelLoadError:
        return False


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
    call); with `arch`, the path of your own
    checkpoint (.pth/.pt/.bin/.safetensors) for timm architecture `arch` (`checkpoint.load`: DINO's
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
        from attention.vit.checkpoint import checkpoint_spec

        timm_name, spec = arch, checkpoint_spec(name, arch, checkpoint_key, family)
    else:
        timm_name, spec = resolve(name)
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
    from attention.vit import weights  # it reads this registry: imported when a model is loaded

    if spec and spec.text and spec.timm_name == "local":
        from attention.vit.text.load import load_shipped

        return load_shipped(spec.alias)
    if timm_name.startswith("open_clip:"):  # the image tower with its text tower (`text.load`)
        from attention.vit.text.load import load_open_clip

        return load_open_clip(timm_name)
    if timm_name.startswith("hf:"):
        from attention.vit.backbone.load import load_named

        return load_named(timm_name)
    if spec and spec.timm_name == "local":
        return weights.load_local(spec.alias)
    if spec and spec.checkpoint:
        from attention.vit import checkpoint

        model = checkpoint.load(spec.checkpoint, spec.timm_name, spec.checkpoint_key)
        return weights.check_vit(model, spec.timm_name)
    return weights.load_hub(timm_name)


def _cache_name(timm_name: str, spec: ModelSpec | None) -> str:
    """Everything that determines the loaded model: for a checkpoint its alias, architecture, key, family,
    path and the file's identity (device, inode, size, modification time: the next epoch's file written
    over the last is another model); else the alias or timm name."""
    if spec and spec.checkpoint:
        try:
            st = os.stat(spec.checkpoint)
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
