"""Spec of attention.vit.serve.gpu: the ZeroGPU wrapper is `spaces.GPU` on a ZeroGPU Space, a no-op elsewhere."""

from __future__ import annotations

import sys
import types

from attention.vit.serve import gpu


def test_gpu_is_a_no_op_without_spaces_and_wraps_with_spaces_gpu(monkeypatch):
    def f(x):
        return x + 1

    monkeypatch.setitem(sys.modules, "spaces", None)  # import fails
    assert gpu.gpu(f) is f and gpu.gpu(duration=5)(f) is f
    seen = []
    fake = types.SimpleNamespace(GPU=lambda duration: lambda fn: seen.append(duration) or (lambda *a: ("gpu", fn(*a))))
    monkeypatch.setitem(sys.modules, "spaces", fake)
    assert gpu.gpu(f)(1) == ("gpu", 2) and gpu.gpu(duration=120)(f)(1) == ("gpu", 2)
    assert seen == [gpu.GPU_SECONDS, 120]
