"""One description of a backbone: everything the engine reads of a model, whatever library built it.

The engine (`capture`, `rows`, `extract`, `preprocess`, `batch`, `relevance`, `features`, `video`)
reads a model only through its `Backbone`, never a library's attributes:

    bb = describe(model)          # timm, transformers, Meta's dino/dinov2/dinov3, open_clip, torchvision
    bb.blocks, bb.attention       # the L blocks in order; the module holding each layer's attention
    bb.prefix                     # ("cls", "reg0", ...): the prefix tokens by name, in sequence order
    bb.patch, bb.grid(h, w)       # patch (ph, pw) px; the patch grid of an (h, w) px input
    bb.final                      # its forward output is the last layer's tokens (B, N, D)
    bb.mean, bb.std, bb.crop      # the preprocessing: normalisation, the crop rule, "auto" resolution
    bb.run(x, head=False)         # the forward that produces the tokens (and the pool/classifier head)
    bb.labels()                   # a classifier's class names (C,), as its library records them

How each attention module's kernel call is read is the same for every library (`capture`): the
`F.scaled_dot_product_attention` call it makes (fused paths: timm, transformers sdpa, DINOv3), the
explicit scores -> softmax -> @ v it computes (unfused paths: timm under TIMM_FUSED_ATTN=0,
transformers eager, DINO's and DINOv2's own classes), or, for `nn.MultiheadAttention` (torchvision,
open_clip), q and k recomputed exactly from its input and `in_proj` weights.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from attention.errors import UnsupportedModelError

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
HALF = (0.5, 0.5, 0.5)
CLIP_MEAN, CLIP_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True, eq=False)
class Backbone:
    """What the engine reads of one model object (`describe`). L blocks, H heads, width D.

    attention: L modules (one per block) and, when the model pools by attention, the pool's as L + 1:
    each makes exactly one attention computation per forward, read by `capture`.
    final: the module whose forward returns the last layer's tokens (B, N, D) (the final norm, or the
    last block when the library has no norm over all tokens: transformers' CLIP).
    run(x, head): the forward of x (B, C, H, W) in the model's dtype/device; with head, the pool or
    classifier head too; returns the library's output (logits for a classifier with head=True).
    """

    library: str  # "timm", "transformers", "dinov2", "dino", "dinov3", "open_clip", "torchvision"
    model: torch.nn.Module
    blocks: tuple[torch.nn.Module, ...]
    attention: tuple[torch.nn.Module, ...]
    final: torch.nn.Module
    prefix: tuple[str, ...]
    patch: tuple[int, int]
    heads: int
    width: int
    run: Callable[[torch.Tensor, bool], object]
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD
    input_size: tuple[int, int] = (224, 224)  # (H, W) px it was trained at
    fixed: tuple[int, int] | None = None  # (H, W) px when it takes only that size
    crop: str = "center"  # "center", "top-left" (DINO) or "resize" (DINOv3's notebooks)
    resize: str = "bicubic"  # the resize filter (`images.RESIZES`): the family's own (bilinear for DINO's script)
    auto_resolution: int | None = None  # what resolution "auto" means; None: input_size's
    pool: bool = False  # pools by attention: the query "pool" is layer L's one query
    classifier: bool = False  # run(x, head=True) returns class logits (B, C) read from the class token
    extra: dict = field(default_factory=dict, repr=False)
    # the class names of the head's C outputs, in order, from the library's own record (transformers'
    # config.id2label, timm's pretrained_cfg / ImageNet's names, torchvision's weights meta); () for no head
    labels: Callable[[], tuple[str, ...]] = field(default=lambda: (), repr=False)

    @functools.cached_property
    def mlp_width(self) -> int:
        """A plain two-layer MLP's width with the multiply-adds of the first block's `mlp` (`cost`;
        `plain_mlp_width`); 4D when it has none."""
        return plain_mlp_width(getattr(self.blocks[0], "mlp", None), self.width)

    @property
    def depth(self) -> int:
        """L: the blocks."""
        return len(self.blocks)

    @property
    def num_prefix_tokens(self) -> int:
        """P: tokens before the patches."""
        return len(self.prefix)

    @property
    def patch_size(self) -> int:
        """The patch side in px (square patches only: `describe` refuses others)."""
        return self.patch[0]

    def grid(self, h: int, w: int) -> tuple[int, int]:
        """(gh, gw): the patch grid of an (h, w) px input (a partial patch is dropped, as a strided conv does)."""
        return h // self.patch[0], w // self.patch[1]

    def tokens(self, h: int, w: int) -> int:
        """N = P + gh * gw for an (h, w) px input."""
        gh, gw = self.grid(h, w)
        return self.num_prefix_tokens + gh * gw

    @property
    def default_resolution(self) -> int:
        """What resolution="auto" means: the family's (480 for DINO, 768 for DINOv3), else the trained size."""
        return int(self.auto_resolution or self.input_size[-1])


def check_square(name: str, patch) -> tuple[int, int]:
    """(p, p) from a patch size (int or pair); UnsupportedModelError for a non-square patch."""
    ph, pw = (int(patch), int(patch)) if isinstance(patch, int) else (int(patch[0]), int(patch[1]))
    if ph != pw:
        raise UnsupportedModelError(
            f"{name} has non-square patches ({ph}x{pw} px); the engine draws maps on square patches only "
            "(accepted: ph == pw)."
        )
    return ph, pw


def plain_mlp_width(mlp: torch.nn.Module | None, width: int) -> int:
    """A plain two-layer MLP's width with the multiply-adds of `mlp`'s Linear layers (`cost`): their
    weights / 2D (a SwiGLU's three: 1.5x its hidden width); 4D when it has none."""
    lin = [] if mlp is None else [m for m in mlp.modules() if isinstance(m, torch.nn.Linear)]
    macs = sum(m.in_features * m.out_features for m in lin)
    return macs // (2 * width) if macs else 4 * width


def numbered(n: int) -> tuple[str, ...]:
    """("class 0", ..., "class n-1"): the names of a head whose library records none."""
    return tuple(f"class {i}" for i in range(n))


def first_tensor(out) -> torch.Tensor:
    """A block's output tokens: the tensor itself, or the first element of a tuple/list."""
    return out[0] if isinstance(out, (tuple, list)) else out


def served_rules(model, crop: str = "center", resize: str = "bicubic", auto_resolution: int | None = None) -> dict:
    """A `Backbone`'s crop, resize and auto_resolution: what the loader set on `model` (`crop_rule`, `resize_rule`,
    `auto_resolution`: its family's rules), else the library's own (the arguments)."""
    return {
        "crop": getattr(model, "crop_rule", crop),
        "resize": getattr(model, "resize_rule", resize),
        "auto_resolution": getattr(model, "auto_resolution", auto_resolution),
    }
