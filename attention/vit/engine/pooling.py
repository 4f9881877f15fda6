"""A model's embedding of an image, named truly: the CLS token when the model has one, else what the
model's own head pools (timm's `forward_head(..., pre_logits=True)`): the mean of the patch tokens (GAP)
or the attention-pooling head's output (MAP, SigLIP). Never token 0 of a model without CLS, which is a
register or patch (0, 0).

    emb, kind = embeddings(model, tokens)     # tokens (B, N, D) after the final norm -> (B, D), "cls"
    EMBEDDINGS[kind]                          # "the CLS token after the final norm"
"""

from __future__ import annotations

import numpy as np
import torch

from attention.vit.engine.query import prefix_tokens

EMBEDDINGS = {
    "cls": "the CLS token after the final norm",
    "avg": "the mean of the patch tokens (GAP), pooled as the model's own head pools",
    "map": "the attention-pooling head's output (MAP), as the model's own head pools",
    "max": "the maximum over the patch tokens, pooled as the model's own head pools",
    "avgmax": "the mean and maximum over the patch tokens, pooled as the model's own head pools",
}


def embedding_kind(model: torch.nn.Module) -> str:
    """Which embedding `embeddings` gives for `model`: a key of EMBEDDINGS."""
    if "cls" in prefix_tokens(model):
        return "cls"
    pool = getattr(model, "global_pool", "") or ""
    return pool if pool in EMBEDDINGS and pool != "cls" and pool != "token" else "avg"


@torch.inference_mode()
def embeddings(model: torch.nn.Module, tokens: torch.Tensor) -> tuple[np.ndarray, str]:
    """float32 (B, D) embeddings from the last layer's tokens (B, N, D) after the final norm, and their kind
    (`embedding_kind`): the CLS token, else the model's own pooling (`forward_head(pre_logits=True)`, its
    pooling and fc_norm; a model whose head does not pool (global_pool '' or 'token' without CLS): the mean
    of its patch tokens)."""
    kind = embedding_kind(model)
    if kind == "cls":
        return tokens[:, prefix_tokens(model).index("cls")].float().cpu().numpy(), kind
    pool = getattr(model, "global_pool", "") or ""
    if pool == kind:
        param = next(model.parameters())
        out = model.forward_head(tokens.to(param.device, param.dtype), pre_logits=True)
    else:
        out = tokens[:, len(prefix_tokens(model)) :].mean(1)
    return out.float().cpu().numpy(), kind
