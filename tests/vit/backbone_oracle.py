"""Helpers of the backbone tests: tiny models with peaked random weights, and the comparison of the
engine's rows with a library's own full attention matrices (the oracle)."""

from __future__ import annotations

import torch

from attention.vit.engine.rows import run_pass

TOL = 1e-4  # of each row's peak


def peak(model: torch.nn.Module, factor: float = 2.0, names=("q_proj", "k_proj", "query", "key", "qkv")) -> None:
    """Redraw the query/key projections of `model` with std factor / sqrt(width), so its softmax rows
    are peaked (scores of std ~ factor^2, not near uniform): a wrong row or token order cannot hide
    inside the tolerance. Seeded by the caller's torch.manual_seed."""
    with torch.no_grad():
        for n, m in model.named_modules():
            if isinstance(m, torch.nn.Linear) and n.rsplit(".", 1)[-1] in names:
                m.weight.normal_(0, factor / m.in_features**0.5)
            if isinstance(m, torch.nn.MultiheadAttention) and m.in_proj_weight is not None:
                e = m.embed_dim
                m.in_proj_weight[: 2 * e].normal_(0, factor / e**0.5)


def queries(n_tokens: int, prefix: int) -> list[int]:
    """Token indices to check: every prefix token, the first, a middle and the last patch."""
    return sorted({*range(prefix), prefix, (prefix + n_tokens) // 2, n_tokens - 1})


def assert_rows_match(model, x: torch.Tensor, oracle: list[torch.Tensor], prefix: int) -> float:
    """For every layer, head and a set of query tokens (prefix and patches), the engine's row
    (softmax of `run_pass`'s scores) against `oracle[l]` (B, H, N, N) within TOL of the row's peak.
    Returns the worst |diff| / peak seen."""
    N = oracle[0].shape[-1]
    assert x.shape[0] == oracle[0].shape[0]
    worst = 0.0
    for i in queries(N, prefix):
        with torch.inference_mode():
            rec = run_pass(model, x, i, keep_qk=False)
        rows = torch.softmax(rec.rows_cpu(), -1)  # (B, L, H, N)
        assert rows.shape[1] == len(oracle), (rows.shape, len(oracle))
        for layer, ref in enumerate(oracle):
            ref_row = ref[:, :, i].float()  # (B, H, N)
            err = ((rows[:, layer] - ref_row).abs().amax(-1) / ref_row.amax(-1)).max().item()
            assert err < TOL, f"layer {layer} query {i}: {err:.2e} of the peak"
            worst = max(worst, err)
    # the rows are peaked: a uniform row would be 1/N
    assert float(oracle[-1].amax(-1).mean()) > 2.0 / N
    return worst
