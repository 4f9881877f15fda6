"""Checkpoint formats people hold, detected and converted to a timm architecture's tensor names
(`checkpoint.load` calls `convert` between reading the file and fitting the tensors):

    torch.compile      `_orig_mod.` in key names (anywhere: `module._orig_mod.blocks...`)      removed
    DINOv2 FSDP        `teacher.backbone.*` (its `model` dict also holds the student, heads)    teacher's backbone
    DINOv2 chunks      `blocks.<chunk>.<i>.*` (block_chunks > 0; i is the block's index)        `blocks.<i>.*`
    transformers       `embeddings.*`, `encoder.layer.<i>.*` or `layers.<i>.*` (model.safetensors of
                       Dinov2Model, Dinov2WithRegistersModel, ViTModel, DeiTModel; old and new names;
                       a `dinov2.`/`vit.`/`deit.` classifier wrapper with its `classifier`)     Meta's names, then:
    Meta's own         DINOv2 `register_tokens`, `pos_embed` with the CLS row, `mask_token`;
                       DINOv3 `storage_tokens`, `ls1.gamma`, `rope_embed.periods`               timm's own
                                                                                                checkpoint_filter_fn
A classifier's head (`head.weight` (C, D), or transformers' `classifier`) is kept: `head_classes`
says how many classes to build the architecture with, so `relevance` explains one's own classifier.
"""

from __future__ import annotations

import re
import sys

import torch

from attention.errors import CheckpointError

Tensors = dict[str, torch.Tensor]

_HF_BLOCK = re.compile(r"^(?:encoder\.layer|layers|encoder\.layers)\.(\d+)\.(.+)$")
_HF_NAMES = [  # transformers block part -> Meta's/timm's (old names, then transformers 5's)
    ("norm1.", "norm1."),
    ("norm2.", "norm2."),
    ("layernorm_before.", "norm1."),
    ("layernorm_after.", "norm2."),
    ("attention.output.dense.", "attn.proj."),
    ("attention.o_proj.", "attn.proj."),
    ("layer_scale1.lambda1", "ls1.gamma"),
    ("layer_scale2.lambda1", "ls2.gamma"),
    ("intermediate.dense.", "mlp.fc1."),
    ("output.dense.", "mlp.fc2."),
    ("mlp.fc1.", "mlp.fc1."),
    ("mlp.fc2.", "mlp.fc2."),
    ("mlp.weights_in.", "mlp.w12."),
    ("mlp.weights_out.", "mlp.w3."),
]
_HF_QKV = {"attention.attention.query.": 0, "attention.attention.key.": 1, "attention.attention.value.": 2}
_HF_QKV |= {"attention.q_proj.": 0, "attention.k_proj.": 1, "attention.v_proj.": 2}
_HF_TOP = {
    "embeddings.cls_token": "cls_token",
    "embeddings.mask_token": "mask_token",
    "embeddings.register_tokens": "register_tokens",
    "embeddings.distillation_token": "dist_token",
    "embeddings.position_embeddings": "pos_embed",
    "embeddings.patch_embeddings.projection.weight": "patch_embed.proj.weight",
    "embeddings.patch_embeddings.projection.bias": "patch_embed.proj.bias",
    "layernorm.weight": "norm.weight",
    "layernorm.bias": "norm.bias",
    "classifier.weight": "head.weight",
    "classifier.bias": "head.bias",
}


def head_classes(tensors: Tensors) -> int:
    """The classes of a classifier head in `tensors` (`head.weight` (C, D), or transformers' `classifier`),
    0 for none."""
    for k in ("head.weight", "classifier.weight", "_orig_mod.head.weight"):
        w = tensors.get(k)
        if w is not None and w.dim() == 2:
            return int(w.shape[0])
    return 0


def convert(tensors: Tensors, model: torch.nn.Module) -> tuple[Tensors, tuple[str, ...]]:
    """`tensors` renamed for timm `model`, and the formats found (for the load report). Tensors already
    in the model's names pass through unchanged."""
    found = []
    if any("_orig_mod." in k for k in tensors):
        found.append("torch.compile (_orig_mod.)")
        tensors = {k.replace("_orig_mod.", ""): v for k, v in tensors.items()}
    if any(k.startswith("teacher.backbone.") for k in tensors):
        found.append("DINOv2 FSDP (teacher.backbone.)")
        tensors = {k[17:]: v for k, v in tensors.items() if k.startswith("teacher.backbone.")}
    own = model.state_dict()
    if any(re.match(r"^blocks\.\d+\.\d+\.", k) for k in tensors) and not any(
        re.match(r"^blocks\.\d+\.\d+\.", k) for k in own
    ):
        found.append("DINOv2 block chunks (blocks.<chunk>.<i>)")
        tensors = {re.sub(r"^blocks\.\d+\.(\d+)\.", r"blocks.\1.", k): v for k, v in tensors.items()}
    wrapper = next((p for p in ("dinov2.", "vit.", "deit.") if f"{p}embeddings.cls_token" in tensors), "")
    if wrapper or "embeddings.cls_token" in tensors or "embeddings.patch_embeddings.projection.weight" in tensors:
        found.append("transformers (embeddings., encoder.layer.)")
        tensors = _from_hf(tensors, wrapper)
    if set(tensors) - set(own) or set(own) - set(tensors):
        fn = getattr(sys.modules.get(type(model).__module__), "checkpoint_filter_fn", None)
        meta = ("mask_token" in tensors or "storage_tokens" in tensors or "register_tokens" in tensors) and fn
        if meta:
            found.append("Meta's DINOv2/DINOv3 names (timm's checkpoint_filter_fn)")
            _check_meta_qkv_bias(tensors, own)
            head = {k: v for k, v in tensors.items() if k.startswith("head.")}
            tensors = {k: v for k, v in tensors.items() if not k.startswith(("head.", "dino_head.", "ibot_head."))}
            tensors = dict(fn(tensors, model)) | head
    return tensors, tuple(found)


def _check_meta_qkv_bias(tensors: Tensors, own: Tensors) -> None:
    """timm's filter drops Meta's `attn.qkv.bias` for an architecture without q/v biases (DINOv3's released
    biases are zero): a non-zero one would be lost silently, so it is refused naming the arch that has them."""
    lost = [
        k
        for k, v in tensors.items()
        if re.match(r"^blocks\.\d+\.attn\.qkv\.bias$", k) and k not in own and bool(v.float().abs().max() > 0)
    ]
    if lost and not any(re.search(r"attn\.(q_bias|qkv\.bias)$", k) for k in own):
        raise CheckpointError(
            f"{len(lost)} non-zero attention biases ({lost[0]}, ...) have no place in this architecture, which has "
            "no q/v biases: loading would drop them and give other maps; accepted: the architecture with them "
            "(e.g. --arch vit_small_patch16_dinov3_qkvb for DINOv3 ViT-S/16)."
        )


def _from_hf(tensors: Tensors, wrapper: str) -> Tensors:
    """transformers' names -> Meta's (q, k, v concatenated into qkv; DeiT's distillation classifier left out)."""
    out: Tensors = {}
    qkv: dict[tuple[int, str], list] = {}
    for k, v in tensors.items():
        k = k.removeprefix(wrapper)
        if k in _HF_TOP:
            out[_HF_TOP[k]] = v
            continue
        m = _HF_BLOCK.match(k)
        if not m:
            out[k] = v
            continue
        i, rest = int(m.group(1)), m.group(2)
        part = next((p for p in _HF_QKV if rest.startswith(p)), None)
        if part is not None:
            qkv.setdefault((i, rest[len(part) :]), [None, None, None])[_HF_QKV[part]] = v
            continue
        new = next((b + rest[len(a) :] for a, b in _HF_NAMES if rest.startswith(a)), rest)
        out[f"blocks.{i}.{new}"] = v
    for (i, what), parts in qkv.items():
        if all(p is not None for p in parts):
            out[f"blocks.{i}.attn.qkv.{what}"] = torch.cat(parts, 0)
    return out
