"""Spec of attention.vit.capture, the one hook mechanism: recorders see exactly what each block hands
the attention kernel and what each block outputs, per context, with grad on or off, for batches;
blocks the engine cannot read are refused by name."""

from __future__ import annotations

import threading

import pytest
import torch

from attention.errors import InputError, UnsupportedModelError
from attention.vit import capture
from attention.vit.capture import Recorder, check_supported, recording
from attention.vit.extract import query_rows
from bench.common import random_vit


def tiny(name: str = "vit_tiny_patch16_224", seed: int = 0, **kw) -> torch.nn.Module:
    return random_vit(name, seed, **(dict(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=2) | kw))


class Kernels(Recorder):
    def __init__(self):
        self.seen, self.outs, self.blocks = {}, {}, {}

    def on_kernel(self, layer, q, k, v, mask, scale):
        self.seen[layer] = (q.detach().clone(), k.detach().clone(), v.detach().clone(), mask, scale)

    def on_output(self, layer, out):
        self.outs[layer] = out

    def on_block(self, layer, x):
        self.blocks[layer] = x.detach().clone()


def reference_qkv(model, x):
    """Each block's q, k, v and attention output computed by hand from its weights; the final tokens."""
    out = []
    with torch.no_grad():
        t = model.norm_pre(model._pos_embed(model.patch_embed(x)))
        for blk in model.blocks:
            a, y = blk.attn, blk.norm1(t)
            B, N, _ = y.shape
            q, k, v = a.qkv(y).reshape(B, N, 3, a.num_heads, a.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
            out.append((q, k, v))
            t = blk(t)
    return out, model.norm(t)


def test_recorders_get_the_kernels_arguments_and_output_and_block_tokens():
    model, x = tiny(), torch.randn(2, 3, 32, 48)
    with recording(model, Kernels()) as rec, torch.no_grad():
        y = model.forward_features(x)
    ref, final = reference_qkv(model, x)
    assert sorted(rec.seen) == [0, 1, 2] and sorted(rec.blocks) == [0, 1, 2]
    for i, (q, k, v) in enumerate(ref):
        q2, k2, v2, mask, scale = rec.seen[i]
        torch.testing.assert_close(q2, q)
        torch.testing.assert_close(k2, k)
        torch.testing.assert_close(v2, v)
        assert mask is None and scale == pytest.approx(16**-0.5)
        assert rec.outs[i].shape == (2, 2, q.shape[2], 16)
    torch.testing.assert_close(rec.blocks[2], final)  # the last layer's tokens: after the final norm
    torch.testing.assert_close(y, final)


def test_batched_rows_with_per_sample_queries_equal_single_passes():
    model, x = tiny(), torch.randn(3, 3, 32, 40)
    idx = [0, 5, 11]
    scores, qk = query_rows(model, x, idx, keep_qk=True)
    assert scores.shape == (3, 3, 2, 1 + 4 * 5) and len(qk) == 3 and len(qk[0]) == 3
    for b, i in enumerate(idx):
        solo, solo_qk = query_rows(model, x[b : b + 1], i, keep_qk=True)
        torch.testing.assert_close(scores[b], solo[0], atol=1e-5, rtol=0)
        torch.testing.assert_close(qk[b][1][0], solo_qk[0][1][0], atol=1e-6, rtol=0)
    one, _ = query_rows(model, x, torch.tensor(5))
    torch.testing.assert_close(one[1], scores[1], atol=1e-5, rtol=0)
    with pytest.raises(InputError, match="2 query indices for a batch of 3"):
        query_rows(model, x, [0, 1])


def test_grad_reaches_the_kernel_output_and_the_model_output_is_unchanged():
    model = tiny().requires_grad_(False)
    x = torch.randn(1, 3, 32, 32)
    plain = model.forward_features(x)

    class Grads(Recorder):
        def __init__(self):
            self.grads = {}

        def on_output(self, layer, out):
            out.register_hook(lambda g, layer=layer: self.grads.__setitem__(layer, g))

    x.requires_grad_(True)
    with torch.enable_grad(), recording(model, Grads()) as rec:
        y = model.forward_features(x)
        y.sum().backward()
    torch.testing.assert_close(y.detach(), plain, rtol=0, atol=0)
    assert sorted(rec.grads) == [0, 1, 2] and all(g.abs().sum() > 0 for g in rec.grads.values())


def test_threads_on_one_shared_model_record_only_their_own_pass():
    model = tiny()
    xs = [torch.randn(1, 3, 32, 32) for _ in range(6)]
    solo = [query_rows(model, x, 3)[0] for x in xs]
    got, errors = [None] * 6, []
    start = threading.Barrier(6)

    def run(i):
        try:
            start.wait()
            for _ in range(5):
                got[i] = query_rows(model, xs[i], 3)[0]
                assert torch.equal(got[i], solo[i])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert torch.get_default_dtype() == torch.float32 and torch._C._len_torch_function_stack() == 0


def test_a_recorder_outside_its_context_sees_nothing_and_nested_recorders_both_see_the_pass():
    model, x = tiny(), torch.randn(1, 3, 32, 32)
    a, b = Kernels(), Kernels()
    with recording(model, a), torch.no_grad():
        with recording(model, b):
            model.forward_features(x)
        model.forward_features(x * 0)  # only a is active now
    with torch.no_grad():
        model.forward_features(x)  # none
    torch.testing.assert_close(b.seen[0][0], reference_qkv(model, x)[0][0][0])
    torch.testing.assert_close(a.seen[0][0], reference_qkv(model, x * 0)[0][0][0])


@pytest.mark.parametrize(
    "name, kw, fragment",
    [
        ("vit_dwee_patch16_reg1_gap_256", {}, "DiffAttention blocks are not supported: differential attention"),
        ("vit_base_patch16_224", {"block_fn": "ParallelScalingBlock"}, "ParallelScalingBlock blocks are not supported"),
        ("vit_base_patch16_224", {"block_fn": "ParallelThingsBlock"}, "ParallelThingsBlock blocks are not supported"),
    ],
)
def test_blocks_the_engine_cannot_read_are_refused_by_name(name, kw, fragment):
    from timm.models import vision_transformer as vt

    if "block_fn" in kw:
        kw = {"block_fn": getattr(vt, kw["block_fn"])}
    model = tiny(name, **kw)
    with pytest.raises(UnsupportedModelError, match=fragment):
        check_supported(model)
    with pytest.raises(UnsupportedModelError, match=fragment):
        query_rows(model, torch.randn(1, 3, 32, 32))


def test_unfused_blocks_are_read_as_timm_computes_them_and_the_model_is_left_unfused():
    model = tiny()
    model.blocks[1].attn.fused_attn = False
    before = [blk.attn.fused_attn for blk in model.blocks]
    check_supported(model)
    x = torch.randn(1, 3, 32, 48)
    rec = Kernels()
    with recording(model, rec), torch.no_grad():
        model.forward_features(x)
    assert [blk.attn.fused_attn for blk in model.blocks] == before  # left as the caller set it
    ref, _ = reference_qkv(model, x)
    q, k, _, mask, scale = rec.seen[1]  # the unfused layer: q as timm scales it before q @ k^T
    torch.testing.assert_close(q * scale / model.blocks[1].attn.scale, ref[1][0])
    torch.testing.assert_close(k, ref[1][1])
    assert mask is None


def test_custom_code_with_two_kernel_calls_is_refused():
    model = tiny()
    inner = model.blocks[2].attn.forward

    def twice(x, *a, **k):
        inner(x, *a, **k)
        return inner(x, *a, **k)

    model.blocks[2].attn.forward = twice
    with pytest.raises(UnsupportedModelError, match=r"Attention \(layer 2\) made 2 attention-kernel calls in 1"):
        query_rows(model, torch.randn(1, 3, 32, 32))
    assert isinstance(capture.UnsupportedModelError("x"), InputError)
