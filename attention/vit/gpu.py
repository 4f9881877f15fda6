"""ZeroGPU glue: `gpu` marks the functions that run a model, so a Hugging Face ZeroGPU Space lends
them a GPU for the call (`spaces.GPU`); anywhere else it changes nothing.

    @gpu
    def forward(...): ...                 # a GPU for at most GPU_SECONDS per call on ZeroGPU
"""

from __future__ import annotations

from collections.abc import Callable

# ZeroGPU gives shorter requests priority, so the duration fits the measured work (bench/bench_gpu.py,
# H100): a pass at 480 px takes 5 ms (ViT-S/16) to 7 ms (ViT-B/8, fp16), 40-230 ms with q/k kept; the
# longest pass the GPU budget admits (40,000 GFLOP) 1.5 s. The rest is the first load of a model's
# weights from the local cache onto the GPU (seconds), once per model and process.
GPU_SECONDS = 20


def gpu(fn: Callable | None = None, *, duration: int = GPU_SECONDS):
    """`spaces.GPU(duration=...)` when the `spaces` package is importable (ZeroGPU), else a no-op.

    Use as `@gpu` or `@gpu(duration=120)` on functions that run a model.
    """
    try:
        import spaces  # type: ignore[import-not-found]
    except ImportError:
        spaces = None

    def wrap(f: Callable) -> Callable:
        return spaces.GPU(duration=duration)(f) if spaces is not None else f

    return wrap(fn) if fn is not None else wrap
