"""Spec of the engine's work inside a forward: between the forward's start and its end, the recorders
(`rows.Rows`, `features.Tokens`) and the kernel reading (`capture`) copy nothing between host and
device and read no value back to the host. On a GPU either stalls the stream once per layer: the host
stops queueing kernels ahead and a launch-bound forward becomes latency-bound.

The oracle is torch's own dispatcher: the model runs on the `meta` device (a second device, no data,
no GPU needed) under a TorchDispatchMode that sees every aten op the forward and the hooks make; an op
whose tensors are on two devices (a host<->device copy) or that reads a value to the host (`.item()`,
`bool(t)`, `.tolist()`, `nonzero`) inside the forward is a failure."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from attention.vit.backbone import describe
from attention.vit.engine import features, rows
from bench import compat
from tests.vit.engine.test_capture import tiny

aten = torch.ops.aten
HOST_READS = {aten._local_scalar_dense.default, aten.is_nonzero.default, aten.nonzero.default, aten.item.default}


class Spy(TorchDispatchMode):
    """Every aten op while `inside`, kept when it mixes devices or reads a value back to the host."""

    def __init__(self):
        super().__init__()
        self.inside, self.ops, self.bad = False, 0, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.inside and func in HOST_READS:
            self.bad.append((str(func), "reads a value to the host"))
        out = func(*args, **(kwargs or {}))
        if self.inside:
            self.ops += 1
            devices = {t.device.type for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)}
            if len(devices) > 1:
                self.bad.append((str(func), sorted(devices)))
        return out


def spied(monkeypatch, model: torch.nn.Module) -> Spy:
    """A Spy that is `inside` exactly while the engine's forward (`Backbone.run`) runs."""
    spy, bb = Spy(), describe(model)

    def run(x, head=False):
        spy.inside = True
        try:
            return bb.run(x, head)
        finally:
            spy.inside = False

    monkeypatch.setattr(rows, "describe", lambda m: dataclasses.replace(bb, run=run))
    return spy


def hf_dinov2(impl: str) -> torch.nn.Module:
    import transformers as T

    cfg = T.Dinov2Config(image_size=28, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, patch_size=14)
    model = T.Dinov2Model(cfg).eval()
    model.set_attn_implementation(impl)
    return model


def unfused(model: torch.nn.Module) -> torch.nn.Module:
    for blk in model.blocks:
        blk.attn.fused_attn = False
    return model


def torchvision_vit() -> torch.nn.Module:
    tv = pytest.importorskip("torchvision")
    return tv.models.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32
    )


MODELS = {  # (model, input px): every way a kernel call is read, with and without a mask and a pool head
    "timm fused": (lambda: tiny(), 32),
    "timm unfused (explicit softmax)": (lambda: unfused(tiny()), 32),
    "timm relative position bias (mask)": (lambda: compat.tiny("vit_relpos_small_patch16_224", (48, 48)), 48),
    "timm attention pool (SigLIP)": (lambda: compat.tiny("vit_base_patch16_siglip_224", (32, 32)), 32),
    "transformers sdpa": (lambda: hf_dinov2("sdpa"), 28),
    "transformers eager": (lambda: hf_dinov2("eager"), 28),
    "torchvision nn.MultiheadAttention": (torchvision_vit, 32),
}


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("index", [0, [0, 3]], ids=["one query", "a query per sample"])
def test_no_host_device_copy_or_host_read_inside_the_forward(monkeypatch, name, index):
    make, px = MODELS[name]
    model = make().eval().to("meta")
    spy = spied(monkeypatch, model)
    x = torch.empty(2, 3, px, px, device="meta")
    with torch.inference_mode(), spy:
        rec = rows.run_pass(model, x, index, keep_qk=True, pool=describe(model).pool)
    assert spy.ops > 0 and not spy.inside  # the spy saw the forward
    assert spy.bad == []
    assert all(r is not None and r.device.type == "meta" for r in rec.rows)


def test_the_features_recorder_copies_nothing_inside_the_forward():
    model = tiny().to("meta")
    spy = Spy()
    model.blocks[0].register_forward_pre_hook(lambda *a: setattr(spy, "inside", True))
    model.norm.register_forward_hook(lambda *a: setattr(spy, "inside", False))
    with torch.inference_mode(), spy, features.recording(model) as rec:
        model.forward_features(torch.empty(1, 3, 32, 32, device="meta"))
    assert spy.ops > 0 and spy.bad == []
    assert all(t.device.type == "meta" for t in rec.layers)


def test_the_spy_sees_a_host_to_device_copy_in_a_hook(monkeypatch):
    """The check can fail: an index kept on the host and moved to the device in each layer's row."""
    model = tiny().to("meta")
    spy = spied(monkeypatch, model)
    scores = rows.batch_scores
    monkeypatch.setattr(rows, "batch_scores", lambda q, k, i, s, m: scores(q, k, torch.tensor([i]).to(q.device), s, m))
    with torch.inference_mode(), spy:
        rows.run_pass(model, torch.empty(1, 3, 32, 32, device="meta"), 0, keep_qk=False)
    assert spy.bad and all(devices == ["cpu", "meta"] for _, devices in spy.bad)
