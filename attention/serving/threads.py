"""torch's intra-op threads of one thread, for a while: a heavy job (relevance, text relevance, a video)
computed on the CPU with ATTENTION_HEAVY_THREADS of them (0, the default: as torch has them), e.g. to leave the
light lane's forwards of other visitors a core. `torch.set_num_threads` called in a thread applies to that thread only;
the previous value comes back on leaving (Gradio reuses its worker threads).

    with torch_threads(SETTINGS.heavy_threads):   # in the thread that runs the job's torch work
        relevance(...)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """This thread's torch intra-op threads set to `n` while inside, the previous value restored after.
    None or 0, or where CUDA is available (the work is the GPU's; its CPU side is left as it is): nothing."""
    if not n:
        yield
        return
    import torch

    if torch.cuda.is_available():
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
