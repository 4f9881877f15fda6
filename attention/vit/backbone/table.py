"""docs/compat.md's table of the libraries whose model objects the engine reads (the built-in entries of the
registry, then one's own class and the holders), generated from the descriptions themselves
(`python -m attention.vit.backbone.table`); tests/vit/backbone/test_table.py checks that the page shows exactly
this. What each row's tests measured: docs/models.md's table (`python -m bench.models_compat`)."""

from __future__ import annotations

from attention.vit.backbone import hf, timm
from attention.vit.backbone.wrappers import HOLDERS

ROWS = [  # library, classes, how the attention is read, the oracle its tests compare with, the tests
    (
        "timm",
        "VisionTransformer, DeiT, Eva (EVA-02, DINOv3, RoPE ViTs), BEiT, relpos ViTs; by `create_model` or "
        "constructor; fused or unfused (TIMM_FUSED_ATTN=0/2)",
        "fused kernel call, or its explicit softmax",
        "timm's unfused softmax",
        "test_families.py, test_timm.py",
    ),
    (
        "transformers",
        ", ".join(hf.CLASSES) + " (sdpa and eager); " + ", ".join(hf.CLASSIFIERS),
        "sdpa kernel call, or eager's explicit softmax; SigLIP's pool: nn.MultiheadAttention",
        "`output_attentions=True` under eager",
        "test_hf.py, test_load.py, test_transformers.py (relevance)",
    ),
    (
        "Meta (torch.hub)",
        "DINOv2 `DinoVisionTransformer` (block chunks; registers), DINO `VisionTransformer`, DINOv3 "
        "`DinoVisionTransformer` (storage tokens, RoPE), by module layout",
        "explicit softmax (DINO, DINOv2); DINOv3's kernel call, read per block",
        "its own qkv's softmax (`dinov2` package); DINO, DINOv3, DINOv2-reg: checked once against their repos",
        "test_meta.py",
    ),
    (
        "open_clip",
        "visual towers: VisionTransformer, TimmModel (its timm trunk)",
        "nn.MultiheadAttention: q, k from its input and in_proj weights",
        "`need_weights=True, average_attn_weights=False`",
        "test_mha.py, test_load.py",
    ),
    (
        "torchvision",
        "VisionTransformer (vit_b_16 ...), a classifier: `relevance` too",
        "nn.MultiheadAttention: q, k from its input and in_proj weights",
        "`need_weights=True, average_attn_weights=False`",
        "test_mha.py",
    ),
    (
        "your own class",
        "any torch.nn.Module class described with `attention.register_backbone(cls, Layout(...))`, tried before "
        "the libraries",
        "the same three readings: kernel call, explicit softmax, nn.MultiheadAttention",
        "the full softmax of its own q, k (float64)",
        "test_register.py",
    ),
    (
        "holders",
        ", ".join(HOLDERS) + "; a transformers pipeline refused by name (`attention.unwrap(pipe)`)",
        "the held model's",
        "the held model's library's",
        "test_wrappers.py",
    ),
]


def table() -> str:
    """The Markdown table: one row per library, then the refused kinds."""
    head = "| library | model objects described | attention read at | exact against (1e-4 of each row's peak) | tests |"
    lines = [head, "|---|---|---|---|---|"]
    lines += [f"| {' | '.join(r)} |" for r in ROWS]
    refused = sorted({f"{k} ({v.split(':')[0]})" for k, v in timm.REFUSED_MODELS.items()})
    lines.append(
        "| refused (typed, before any forward) | "
        + "; ".join(refused)
        + "; hybrid ViTs with a CNN stem; non-square patches | - | - | test_timm.py |"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
