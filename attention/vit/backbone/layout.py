"""A ViT class of one's own, described by where it keeps things (`Layout`), for `register_backbone`:

    register_backbone(MyViT, Layout(blocks="layers", attention="mixer", final="ln", prefix=("cls", "reg0"),
                                    patch=16, heads="n_heads", width="dim", forward="tokens"))

Attribute paths (dots for nesting) are read on the model (`blocks`, `final`, `patch`, `width`, `input_size`)
or on each block (`attention`) or on the first attention module (`heads`). How the attention is read is the
engine's one way for every library (`backbone.kernel`): each attention module's forward must make exactly one
attention computation, as one `F.scaled_dot_product_attention` call, one explicit `q @ k^T` [`* scale`]
[`+ mask`] `softmax` `@ v`, or one `nn.MultiheadAttention` call; a module that makes none (another kernel) or
two is refused after the pass. When a block reaches its attention through a method, not a module call, name the
block itself (`attention=None`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from attention.errors import UnsupportedModelError
from attention.vit.backbone.spec import IMAGENET_MEAN, IMAGENET_STD, Backbone, check_square, numbered


def attribute(obj, path: str, what: str):
    """`obj`'s attribute at the dotted `path`; UnsupportedModelError naming `what` and the path when absent."""
    for part in path.split("."):
        if not hasattr(obj, part):
            raise UnsupportedModelError(f"{type(obj).__name__} has no {part!r} (the {what}: {path!r} in its Layout).")
        obj = getattr(obj, part)
    return obj


def _pair(v) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


@dataclass(frozen=True)
class Layout:
    """Where a ViT class keeps what the engine reads; `describe(model)` builds its `Backbone`.

    blocks: the L blocks in order (a ModuleList). attention: each block's attention module (None: the block).
    final: the module whose output is the last layer's tokens (B, N, D) (the final norm).
    prefix: the tokens before the patches, in order ("cls", "dist", "reg0", ...); the patches follow, row-major.
    patch: the patch side in px, or the path of it. heads: H, or its path on the attention module. width: D or
    its path. forward: the method giving the tokens of x (B, C, H, W), or a function (model, x) -> tokens.
    head: for a classifier, the method from forward's output to logits (B, C), or a function (model, tokens)
    -> logits; None: no classifier. labels: its class names (C,), the path of them, or a function model ->
    names; None: "class i" for C = `num_classes`, else the last nn.Linear's outputs. readout: how the head
    reads the tokens ("token": the class token; relevance explains that only).
    mean, std, input_size (H, W px, or the path of it), fixed (it takes input_size only), crop, resize: how
    images are fed (`Backbone`)."""

    blocks: str = "blocks"
    attention: str | None = "attn"
    final: str = "norm"
    prefix: tuple[str, ...] = ("cls",)
    patch: int | str = "patch_embed.patch_size"
    heads: int | str = "num_heads"
    width: int | str = "embed_dim"
    forward: str | Callable = "forward_features"
    head: str | Callable | None = None
    labels: Sequence[str] | str | Callable | None = None
    readout: str = "token"
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD
    input_size: tuple[int, int] | str = (224, 224)
    fixed: bool = False
    crop: str = "center"
    resize: str = "bicubic"
    library: str = "registered"

    def describe(self, model: torch.nn.Module) -> Backbone:
        """The Backbone of `model` by this layout; UnsupportedModelError naming what is missing."""
        name = type(model).__name__
        blocks = list(attribute(model, self.blocks, "blocks"))
        if not blocks:
            raise UnsupportedModelError(f"{name} has no blocks (at {self.blocks!r}).")
        attn = [b if self.attention is None else attribute(b, self.attention, "attention module") for b in blocks]
        if not all(isinstance(a, torch.nn.Module) for a in attn):
            raise UnsupportedModelError(f"{name}: its attention ({self.attention!r}) is not a module in every block.")
        final = attribute(model, self.final, "final norm")
        patch = self.patch if isinstance(self.patch, int) else attribute(model, self.patch, "patch size")
        heads = self.heads if isinstance(self.heads, int) else attribute(attn[0], self.heads, "number of heads")
        width = self.width if isinstance(self.width, int) else attribute(model, self.width, "width")
        size = self.input_size if not isinstance(self.input_size, str) else attribute(model, self.input_size, "size")
        forward = attribute(model, self.forward, "forward") if isinstance(self.forward, str) else None
        head = attribute(model, self.head, "head") if isinstance(self.head, str) else None

        def run(x: torch.Tensor, with_head: bool = False):
            tokens = forward(x) if forward is not None else self.forward(model, x)
            if not with_head or self.head is None:
                return tokens
            return head(tokens) if head is not None else self.head(model, tokens)

        return Backbone(
            library=self.library,
            model=model,
            blocks=tuple(blocks),
            attention=tuple(attn),
            final=final,
            prefix=tuple(self.prefix),
            patch=check_square(name, patch),
            heads=int(heads),
            width=int(width),
            run=run,
            mean=tuple(self.mean),
            std=tuple(self.std),
            input_size=_pair(size),
            fixed=_pair(size) if self.fixed else None,
            crop=self.crop,
            resize=self.resize,
            classifier=self.head is not None,
            extra={"readout": self.readout},
            labels=lambda: self._labels(model) if self.head is not None else (),
        )

    def _labels(self, model: torch.nn.Module) -> tuple[str, ...]:
        """The class names: given, at a path, from a function, else numbered by the head's size."""
        if callable(self.labels):
            return tuple(self.labels(model))
        if isinstance(self.labels, str):
            return tuple(attribute(model, self.labels, "class names"))
        if self.labels is not None:
            return tuple(self.labels)
        n = getattr(model, "num_classes", None)
        if n is None:
            linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
            n = linear[-1].out_features if linear else 0
        return numbered(int(n))
