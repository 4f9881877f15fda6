"""The proxy rule's features: another vision model's (a DINO or DINOv2, any backbone the engine describes) patch
tokens on the text model's own patch grid, for ProxyCLIP's idea of its patch-patch similarity as the last
block's attention (`openvocab.rule_rows("proxy", ...)`).

    x = proxy_features(dino, shown, (gh, gw))      # (gh * gw, D): its last layer's patch tokens, final norm

The shown image (what the text model saw) is resized so that the proxy model's grid is the same (gh, gw): each
of its patches sees the same pixels as the text model's patch there.
"""

from __future__ import annotations

import torch
from PIL import Image

from attention.images import to_tensor
from attention.vit.backbone import describe
from attention.vit.engine.capture import BlockTokens, recording


def proxy_features(model: torch.nn.Module, shown: Image.Image, grid: tuple[int, int]) -> torch.Tensor:
    """The last layer's patch tokens (after its final norm) of `model` on `shown` resized to `grid` patches of
    its own size, float32 (gh * gw, D), prefix tokens dropped."""
    bb = describe(model)
    ph, pw = bb.patch
    gh, gw = grid
    img = shown.convert("RGB").resize((gw * pw, gh * ph), Image.BICUBIC)
    x, _ = to_tensor(img, patch_size=ph, mean=bb.mean, std=bb.std, resolution=None, max_tokens=gh * gw)
    p = next(model.parameters())
    rec = BlockTokens(bb.depth - 1)
    with torch.inference_mode(), recording(model, rec):
        bb.run(x.to(p.device, p.dtype), False)
    return rec.tokens[0, bb.num_prefix_tokens :].float()
