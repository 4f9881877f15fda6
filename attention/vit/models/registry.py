"""What a model is, as data: the registry of aliases (`REGISTRY`, `ModelSpec`), the families' rules of
feeding an image (`FAMILIES`, `family_of`), the default model (`default_model()`), and what timm
modules are accepted. It imports nothing of `attention.vit`: every other module of `models/` reads
it, and the operator's checkpoint is added through `register` (never by rewriting these globals).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from attention.errors import ModelLoadError


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
    """The family of a timm name, `hf-hub:org/repo` or `hf:org/repo`, from its name: a DINOv3 name -> "dinov3"; a
    DINOv2 name (with `reg<n>` or `with-registers`: registers) -> "dinov2"/"dinov2_reg"; a `dino` tag or word
    (`vit_small_patch16_224.dino`, `..._dino`) -> "dino"; anything else -> "timm"."""
    base = name.strip().lower().removeprefix("hf-hub:").rsplit("/", 1)[-1]
    if "dinov3" in base:
        return "dinov3"
    if "dinov2" in base:  # timm's `reg4`, transformers' `dinov2-with-registers-small`
        return "dinov2_reg" if re.search(r"reg\d|with-registers", base) else "dinov2"
    return "dino" if re.search(r"(^|[._-])dino($|[._-])", base) else "timm"


@dataclass(frozen=True)
class ModelSpec:
    """One entry of the registry: a short alias for a timm tag, an `hf:`/`open_clip:` name (or the shipped model)."""

    alias: str
    timm_name: str  # timm tag, `hf:org/repo` (transformers), `open_clip:...`, or "local" for weights shipped in
    # weights/ (the architecture, for a checkpoint)
    description: str
    resolution: int | None  # what "auto" resolution means for this model (shorter side, px; None: trained size)
    family: str = "timm"  # a key of FAMILIES: how its own code crops and resamples position embeddings
    checkpoint: str | None = None  # the operator's own weights file (`checkpoint.register_checkpoint`)
    checkpoint_key: str | None = None  # where in that file the weights sit (DINO's --checkpoint_key)
    classifier: bool = False  # has a classifier head read from its class token (class relevance: "Why this class?")
    text: bool = False  # has a text tower (CLIP, SigLIP: text relevance, "Find in image"); timm_name "open_clip:..."
    gated: bool = False  # its Hub repo asks for the licence to be accepted: a Space's image cannot preload it

    @property
    def hub_id(self) -> str | None:
        for prefix in ("open_clip:hf-hub:", "hf:"):
            if self.timm_name.startswith(prefix):
                return self.timm_name[len(prefix) :]
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
        # the same families in transformers' format (facebook's own repos, `backbone.hf`): fed by the family's
        # rules as the timm entries above; positions resampled by transformers' interpolate_pos_encoding
        ModelSpec("dinov2_vits14_hf", "hf:facebook/dinov2-small", "DINOv2 ViT-S/14 (transformers)", 480, "dinov2"),
        ModelSpec(
            "dinov2_vits14_reg_hf",
            "hf:facebook/dinov2-with-registers-small",
            "DINOv2 ViT-S/14 with 4 registers (transformers)",
            480,
            "dinov2_reg",
        ),
        ModelSpec(  # gated on the Hub (the DINOv3 licence): an HF_TOKEN that accepted it, or a cache holding it
            "dinov3_vits16_hf",
            "hf:facebook/dinov3-vits16-pretrain-lvd1689m",
            "DINOv3 ViT-S/16 (transformers)",
            768,
            "dinov3",
            gated=True,
        ),
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


def default_model_attribute(module: str):
    """A module's `__getattr__` that reads `DEFAULT_MODEL` through `default_model()` at each read (never a
    value bound once at import): `__getattr__ = default_model_attribute(__name__)`."""

    def __getattr__(name: str) -> str:
        if name == "DEFAULT_MODEL":
            return default_model()
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def register(spec: ModelSpec) -> None:
    """Add `spec` to the registry under its alias (the operator's checkpoint: `operator.register_checkpoint`)."""
    REGISTRY[spec.alias] = spec


def unregister(alias: str) -> None:
    """Remove the registry entry `alias` (a checkpoint that failed to load)."""
    REGISTRY.pop(alias, None)


FIXED_SIZE = ["beit", "vision_transformer_relpos"]  # relative-position tables for one grid: the trained size
VIT_MODULES = ["vision_transformer", "deit", "eva", "beit", "vision_transformer_relpos"]  # what `resolve` accepts
