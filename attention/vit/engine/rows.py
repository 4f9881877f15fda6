"""The engine: one fused forward pass of a batch, recording each sample's query row in every layer
from what the attention kernel gets (`capture`): scale * (q_i @ k^T) + bias_i, O(layers x heads x N).

    scores, qk = query_rows(model, x, [0, 5, 11], keep_qk=True)   # x (3, C, H, W): (3, L, H, N)

`attention_maps` (extract) is the single-image API on top of it.
"""

from __future__ import annotations

import operator

import torch

from attention.errors import InputError, UnsupportedModelError
from attention.vit.backbone import describe
from attention.vit.engine.capture import Recorder, recording


def batch_scores(
    q: torch.Tensor, k: torch.Tensor, index: int | torch.Tensor, scale: float, mask: torch.Tensor | None
) -> torch.Tensor:
    """Raw scores of token index[b] against all tokens of sample b, in fp32, as the kernel sees them:
    scale * (q_i @ k^T) + mask_i. q: (B, H, Nq, d), k: (B, H, N, d); index: one token for every sample
    (an int: q's row is a view) or (B,) long on q's device (one per sample: gathered); mask: additive,
    broadcastable to (B, H, Nq, N), or None -> (B, H, N) float32.

    Runs inside the forward: no host<->device copy or sync (`run_pass` moves the indices to the
    device before it), and on a float32 q with no mask one kernel (the scale folded into the matmul)."""
    B, H, Nq, d = q.shape
    N = k.shape[-2]
    if not isinstance(index, torch.Tensor):
        index = operator.index(index)  # an int (or a numpy integer)
        qi = q[:, :, index : index + 1]  # (B, H, 1, d): a view
        mi = None if mask is None else mask.expand(B, H, Nq, N)[:, :, index : index + 1]
    else:
        at = index.view(B, 1, 1, 1)
        qi = q.gather(2, at.expand(B, H, 1, d))
        mi = None if mask is None else mask.expand(B, H, Nq, N).gather(2, at.expand(B, H, 1, N))
    s = torch.empty(B * H, 1, N, dtype=torch.float32, device=q.device)
    if mi is not None:
        s.view(B, H, 1, N).copy_(mi)  # the bias row, converted: a copy, never the model's mask itself
    kt = k.float().transpose(-2, -1).reshape(B * H, d, N)
    s.baddbmm_(qi.float().reshape(B * H, 1, d), kt, beta=0.0 if mi is None else 1.0, alpha=scale)
    return s.view(B, H, N)


class Rows(Recorder):
    """What one forward pass records: each sample's query row in each layer (and q, k, the kernel's
    additive bias, if asked). Activated by `capture.recording` in the calling context only."""

    def __init__(self, index: int | torch.Tensor, keep_qk: bool, n_layers: int, layers: tuple[int, ...] | None = None):
        # the query token: one int for every sample, or (B,) long on the model's device (`batch_scores`)
        self.index, self.keep_qk = index, keep_qk
        self.layers = tuple(range(n_layers)) if layers is None else tuple(layers)  # the layers whose rows are kept
        self.seen = [False] * n_layers  # which layers' kernels ran (every one must)
        self.rows: list[torch.Tensor | None] = [None] * n_layers  # per kept layer (B, H, N) raw scores
        self.qk: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * n_layers  # (B, H, N, d) each
        self.v: list[torch.Tensor | None] = [None] * n_layers  # with keep_qk: (B, H, N, dv), the kernel's values
        self.bias: list[torch.Tensor | None] = [None] * n_layers  # per layer the kernel's mask, as given
        self.scale: list[float] = [1.0] * n_layers
        self.pool: tuple[torch.Tensor, torch.Tensor, torch.Tensor, float] | None = None  # row (B, H, N), q, k, scale

    def rows_cpu(self) -> torch.Tensor:
        """float32 (B, len(layers), H, N) on the CPU: every sample's row in each kept layer (`layers`)."""
        return torch.stack([self.rows[i] for i in self.layers], 1).float().cpu()  # type: ignore[misc]

    def on_kernel(self, layer, q, k, v, mask, scale) -> None:
        if layer >= len(self.rows):  # the attention-pooling head (layer L): its one query
            row = batch_scores(q, k, 0, scale, mask)
            self.pool = (row, compact(q), compact(k), scale) if self.keep_qk else (row, q, k, scale)
            return
        self.seen[layer] = True
        self.scale[layer] = scale
        if layer not in self.layers:
            return
        self.rows[layer] = batch_scores(q, k, self.index, scale, mask)
        if self.keep_qk:  # copies (never views of the block's qkv buffer, which would stay alive whole),
            # on the model's device: no GPU sync inside the forward; moved to the CPU once it is done
            self.qk[layer] = (compact(q), compact(k))
            self.v[layer] = compact(v)  # what a row's output mixes (`stepwise`): no new forward for it
            self.bias[layer] = None if mask is None else mask.detach()


def compact(t: torch.Tensor) -> torch.Tensor:
    """A compact copy of `t` on its device, in its dtype (not a view of a larger buffer)."""
    return t.detach().clone(memory_format=torch.contiguous_format)


def on_cpu(t: torch.Tensor) -> torch.Tensor:
    """`t` as float32 on the CPU: itself when it already is (a compact copy), else one converted copy."""
    return t if t.device.type == "cpu" and t.dtype == torch.float32 else t.to("cpu", torch.float32)


def sample_bias(bias: list[torch.Tensor | None], b: int) -> list[torch.Tensor | None]:
    """Sample b's per-layer bias as float32 CPU (H or 1, N or 1, N); one copy per distinct tensor
    (BEiT's shared bias is one tensor for every layer)."""
    seen: dict[int, torch.Tensor] = {}
    out: list[torch.Tensor | None] = []
    for m in bias:
        if m is None:
            out.append(None)
            continue
        if id(m) not in seen:
            m4 = m.reshape((1,) * (4 - m.dim()) + tuple(m.shape))
            seen[id(m)] = m4[b if m4.shape[0] > 1 else 0].to("cpu", torch.float32).contiguous()
        out.append(seen[id(m)])
    return out


def run_pass(
    model: torch.nn.Module,
    x: torch.Tensor,
    query_index,
    keep_qk: bool,
    pool: bool = False,
    layers: tuple[int, ...] | None = None,
) -> Rows:
    """One forward pass of x (B, C, H, W) (`Backbone.run`) recording each sample's query row in every
    layer (or only in `layers`, non-negative indices); with `pool`, the head too, recording the
    attention-pooling head's row."""
    if x.dim() != 4:
        raise InputError(f"Input of shape {tuple(x.shape)} is not accepted; expected a batch (B, C, H, W).")
    B = x.shape[0]
    idx = [int(i) for i in torch.as_tensor(query_index, dtype=torch.long).reshape(-1).tolist()]
    if len(idx) == 1:
        idx = idx * B
    if len(idx) != B:
        raise InputError(f"{len(idx)} query indices for a batch of {B}; give one int or one per sample.")
    bb = describe(model)
    n = bb.tokens(x.shape[2], x.shape[3])
    if any(i < 0 or i >= n for i in idx):
        raise InputError(f"Query index {idx} is out of range; accepted: 0 to {n - 1} (the {n} tokens).")
    param = next(model.parameters())
    # on the device before the forward: the hooks inside it copy nothing between host and device
    index = idx[0] if len(set(idx)) == 1 else torch.tensor(idx, dtype=torch.long, device=param.device)
    rec = Rows(index, keep_qk, bb.depth, layers)
    with recording(model, rec):
        bb.run(x.to(param.device, param.dtype), pool and bb.pool)
    if not all(rec.seen) or (pool and bb.pool and rec.pool is None):
        raise UnsupportedModelError(
            f"{type(bb.attention[0]).__name__}: a layer ran without an attention computation the engine could read."
        )
    return rec


@torch.inference_mode()
def query_rows(model: torch.nn.Module, x: torch.Tensor, query_index=0, *, keep_qk: bool = False):
    """The engine of `attention_maps`, on a preprocessed batch: one fused forward pass of
    x (B, C, H, W) with the kernel hooks (`capture`). query_index: one token index for every sample,
    or one per sample (a sequence or tensor (B,)). Returns (scores, qk): scores float32 (B, L, H, N)
    on CPU, every layer's raw q_i . k_j * scale (+ the kernel's additive bias, e.g. relative
    position) for token i = query_index[b]; qk, with keep_qk, per sample a list over layers of
    (q, k) float32 (H, N, d) on CPU, else None."""
    rec = run_pass(model, x, query_index, keep_qk)
    scores = rec.rows_cpu()
    if not keep_qk:
        return scores, None
    return scores, [[(on_cpu(q[b]), on_cpu(k[b])) for q, k in rec.qk] for b in range(x.shape[0])]
