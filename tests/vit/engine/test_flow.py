"""Spec of attention.vit.engine.flow: attention rollout (Abnar & Zuidema 2020) from the q and k one pass
kept, chunk by chunk, equals the definition with whole N x N matrices built by hand from each block's
weights (`test_extract.reference`); the "global" discard is jacobgil/vit-explain's rule; the cut it
needs is the exact order statistic."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention.errors import InputError
from attention.vit.engine.extract import attention_maps
from attention.vit.engine.flow import rollout, rollout_map
from tests.vit.engine.test_extract import photo, reference, tiny_vit


def dense_rollout(mats, i, fusion, discard):
    """Rollout with whole N x N matrices (the definition, for small N)."""
    N = mats[0].shape[-1]
    joint = torch.eye(N, dtype=torch.float64)
    for a in mats:  # joint = A'_l ... A'_0
        f = {"mean": a.mean(0), "max": a.amax(0), "min": a.amin(0)}[fusion].double()
        n_drop = int(N * discard)
        if n_drop:
            f.scatter_(-1, f.topk(n_drop, -1, largest=False).indices, 0.0)
        f = f + torch.eye(N, dtype=torch.float64)
        f = f / f.sum(-1, keepdim=True)
        joint = f @ joint
    return joint[i].numpy()


@pytest.mark.parametrize("fusion, discard, chunk", [("mean", 0.0, 7), ("max", 0.9, 16), ("min", 0.5, 1000)])
def test_chunked_rollout_equals_dense_rollout(fusion, discard, chunk):
    model, img = tiny_vit(), photo()
    res = attention_maps(model, img, resolution=None, keep_qk=True)
    mats, _ = reference(model, img)
    for q in ("cls", (3, 3)):
        i = res.requery(q).query_index
        got = rollout(res, query=q, head_fusion=fusion, discard_ratio=discard, chunk=chunk)
        np.testing.assert_allclose(got, dense_rollout(mats, i, fusion, discard), atol=1e-5)
        assert abs(got.sum() - 1) < 1e-5  # a row of a product of row-stochastic matrices
    assert rollout_map(res).shape == res.grid
    with pytest.raises(InputError, match="keep_qk=True"):
        rollout(attention_maps(model, img, resolution=None))


def vit_explain_rollout(mats, fusion, discard):
    """jacobgil/vit-explain's rollout (vit_rollout.py), with whole N x N matrices: per layer fuse heads,
    zero the int(N * N * discard) lowest entries of the flattened matrix but flat index 0, then
    (A + I) / 2, rows renormalised (vit-explain's `a / a.sum(dim=-1)` broadcasts over columns; rows here)."""
    N = mats[0].shape[-1]
    result = torch.eye(N, dtype=torch.float64)
    for a in mats:
        fused = {"mean": a.mean(0), "max": a.amax(0), "min": a.amin(0)}[fusion].clone()
        flat = fused.view(-1)
        idx = flat.topk(int(flat.numel() * discard), largest=False).indices
        flat[idx[idx != 0]] = 0
        a2 = (fused.double() + torch.eye(N, dtype=torch.float64)) / 2
        result = (a2 / a2.sum(-1, keepdim=True)) @ result
    return result


@pytest.mark.parametrize("fusion, discard, chunk", [("mean", 0.9, 16), ("max", 0.5, 7), ("min", 0.97, 1000)])
def test_global_discard_is_vit_explains_rule(fusion, discard, chunk):
    model, img = tiny_vit(), photo()
    res = attention_maps(model, img, resolution=None, keep_qk=True)
    mats, _ = reference(model, img)
    joint = vit_explain_rollout(mats, fusion, discard)
    for q in ("cls", (2, 6)):
        i = res.requery(q).query_index
        got = rollout(res, query=q, head_fusion=fusion, discard_ratio=discard, discard="global", chunk=chunk)
        np.testing.assert_allclose(got, joint[i].numpy(), atol=1e-5)
        assert abs(got.sum() - 1) < 1e-5
    per_row = rollout(res, head_fusion=fusion, discard_ratio=discard, chunk=chunk)
    assert np.abs(per_row - rollout(res, head_fusion=fusion, discard_ratio=discard, discard="global")).max() > 1e-3
    assert np.array_equal(rollout(res, discard="global"), rollout(res))  # nothing discarded: the same
    with pytest.raises(InputError, match="Unknown discard rule 'all'; accepted: row, global"):
        rollout(res, discard="all")


def test_global_cut_is_the_exact_order_statistic():
    """The radix select finds the n-th smallest entry of the fused matrix, zeros and ties included."""
    from attention.vit.engine.flow import _Fused

    torch.manual_seed(0)
    q, k = torch.randn(3, 50, 8) * 3, torch.randn(3, 50, 8) * 3
    dense = torch.softmax(q @ k.transpose(-2, -1) * 0.5, -1).amin(0).flatten().sort().values
    fused = _Fused(q, k, 0.5, "min", chunk=7)
    for n in (1, 2, 100, 1234, 2499, 2500):
        assert fused.global_cut(n) == float(dense[n - 1])


_STREAMED = """
import sys, numpy as np
from attention.vit.engine.flow import rollout
from tests.vit.engine.big_qk import Kept, big_qk
kept = Kept(*big_qk())
def status(key):  # kB
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key))
open("/proc/self/clear_refs", "w").write("5")  # Linux: the peak (VmHWM) reset to what is held now
now = status("VmRSS:")
row = rollout(kept, head_fusion="max", discard_ratio=0.5)
peak = status("VmHWM:") - now  # the most held during the rollout, over what was held before
np.save(sys.argv[1], row)
print(peak * 1024)
"""


@pytest.mark.slow
def test_rollout_at_a_size_whose_whole_matrices_exceed_the_budget_streams_rows(tmp_path):
    """4,096 tokens, 2 heads, 2 layers: one layer's attention is 128 MB, one head-fused N x N matrix 64 MB; the
    budget is 64 MB over what the kept q and k take. The streamed rollout's peak (a fresh process's maximum RSS
    growth) stays under it, and its row equals the whole-matrix definition (built here, head by head, in float64)."""
    import subprocess
    import sys

    out = tmp_path / "row.npy"
    run = subprocess.run([sys.executable, "-c", _STREAMED, str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    peak = int(run.stdout.split()[-1])
    from tests.vit.engine.big_qk import big_qk

    qk, scale = big_qk()
    N = qk[0][0].shape[1]
    whole = N * N * 4 * len(qk[0][0])  # one layer's attention, float32
    print(f"streamed peak {peak / 2**20:.0f} MB; one layer's whole attention {whole / 2**20:.0f} MB")
    assert peak < 64 * 2**20 < whole
    r = torch.zeros(N, dtype=torch.float64)
    r[0] = 1.0
    for q, k in reversed(qk):  # r <- r A'_l, each A'_l whole: max of heads, lowest half of each row dropped, + I
        fused = torch.stack([torch.softmax((q[h] @ k[h].T) * scale, -1) for h in range(len(q))]).amax(0).double()
        fused.scatter_(-1, fused.topk(N // 2, -1, largest=False).indices, 0.0)
        fused += torch.eye(N, dtype=torch.float64)
        r = r @ (fused / fused.sum(-1, keepdim=True))
        del fused
    np.testing.assert_allclose(np.load(out), r.numpy(), atol=1e-5)
