"""A small ViT of one's own, unknown to the package (the worked example of docs/models.md): its blocks in
`layers`, each block's attention in `mixer` (fused through F.scaled_dot_product_attention, or with `explicit`
its own q @ k^T, softmax, @ v), tokens [CLS, two registers, patches], a final `ln`, a classifier `fc` on the CLS
token; and how one describes it to the engine (`LAYOUT`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attention import Layout

# docs/models.md: begin


class Mixer(nn.Module):
    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        self.n_heads, self.to_qkv, self.out = n_heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.explicit, self.seen = False, None  # seen: the explicit path's softmax (the tests' oracle keeps it)

    def qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, N, D = x.shape
        return self.to_qkv(x).reshape(B, N, 3, self.n_heads, D // self.n_heads).permute(2, 0, 3, 1, 4).unbind(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x)
        if self.explicit:
            self.seen = (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(-1)
            o = self.seen @ v
        else:
            o = F.scaled_dot_product_attention(q, k, v)
        return self.out(o.transpose(1, 2).flatten(2))


class Block(nn.Module):
    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        self.ln1, self.mixer, self.ln2 = nn.LayerNorm(dim), Mixer(dim, n_heads), nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.mixer(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class MyViT(nn.Module):
    def __init__(self, dim=32, depth=3, n_heads=4, patch=8, size=32, classes=("cat", "dog", "bird")):
        super().__init__()
        self.dim, self.patch, self.size, self.classes = dim, patch, size, tuple(classes)
        self.to_patches = nn.Conv2d(3, dim, patch, patch)
        self.cls, self.regs = nn.Parameter(torch.randn(1, 1, dim)), nn.Parameter(torch.randn(1, 2, dim))
        self.pos = nn.Parameter(torch.randn(1, (size // patch) ** 2, dim) * 0.1)  # one grid: its trained size
        self.layers = nn.ModuleList(Block(dim, n_heads) for _ in range(depth))
        self.ln, self.fc = nn.LayerNorm(dim), nn.Linear(dim, len(classes))

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        p = self.to_patches(x).flatten(2).transpose(1, 2) + self.pos
        t = torch.cat([self.cls.expand(len(x), -1, -1), self.regs.expand(len(x), -1, -1), p], 1)
        for block in self.layers:
            t = block(t)
        return self.ln(t)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.tokens(x)[:, 0])


LAYOUT = Layout(
    blocks="layers",  # the L blocks, in order
    attention="mixer",  # each block's attention module (one attention computation per forward)
    final="ln",  # its output: the last layer's tokens (B, N, D)
    prefix=("cls", "reg0", "reg1"),  # the tokens before the patches
    patch="patch",
    heads="n_heads",  # on the attention module
    width="dim",
    forward="tokens",  # x (B, 3, H, W) -> tokens
    head=lambda model, tokens: model.fc(tokens[:, 0]),  # tokens -> logits: a classifier, from the CLS token
    labels="classes",
    input_size="size",
    fixed=True,  # its position embeddings are for one grid
)
# docs/models.md: end


def tiny(seed: int = 0) -> MyViT:
    """MyViT with peaked random weights (q, k rows of to_qkv redrawn with std 2/sqrt(dim)), in eval mode."""
    torch.manual_seed(seed)
    model = MyViT().eval()
    with torch.no_grad():
        for block in model.layers:
            block.mixer.to_qkv.weight[: 2 * model.dim].normal_(0, 2 / model.dim**0.5)
        model.fc.weight.mul_(10.0)
    return model
