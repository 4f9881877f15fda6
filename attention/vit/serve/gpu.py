"""ZeroGPU glue: `gpu` marks the functions that run a model, so a Hugging Face ZeroGPU Space lends
them a GPU for the call (`spaces.GPU`); anywhere else it changes nothing.

    @gpu
    def forward(...): ...                 # a GPU for at most GPU_SECONDS per call on ZeroGPU

    @gpu(duration=VIDEO_GPU_SECONDS)
    def job(...): yield from streamed(lambda progress: work(progress))   # a generator: its progress crosses over
    value = drain(job(...), progress)                                    # the caller's bar told on the way
"""

from __future__ import annotations

import io
import queue
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from attention.crowd.threads import NicedThreads

T = TypeVar("T")
OWN_THREAD = NicedThreads(0, "gpu")  # `streamed`'s job without a niced pool: a thread of its own ("gpu-job")

# ZeroGPU gives shorter requests priority, so the duration fits the measured work (bench/bench_gpu.py,
# H100): a pass at 480 px takes 5 ms (ViT-S/16) to 7 ms (ViT-B/8, fp16), 40-230 ms with q/k kept; the
# longest pass the GPU budget admits (40,000 GFLOP) 1.5 s. The rest is the first load of a model's
# weights from the local cache onto the GPU (seconds), once per model and process.
GPU_SECONDS = 20
# A visitor's video: its forwards are bounded by ATTENTION_VIDEO_GFLOP_* (a second or two on an H100),
# the rest is decoding and encoding its frames (at most ATTENTION_VIDEO_MAX_FRAMES) on the CPU.
VIDEO_GPU_SECONDS = 120


def zerogpu() -> bool:
    """True where `spaces` (ZeroGPU) is importable: `gpu` functions then run in a worker process."""
    try:
        import spaces  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return False
    return True


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


Progress = Callable[[float, str], None]  # (fraction 0..1, description)


def bar_to(progress: Progress, what: str = "Frame") -> type:
    """A tqdm class that tells `progress` (fraction, "<what> n of about total") at each update and prints
    nothing: how an engine loop's tqdm (`engine.video.VideoRun.bar`) reaches a `streamed` job's events, whose
    thread (or, on ZeroGPU, process) Gradio's `track_tqdm` does not see."""
    from tqdm.auto import tqdm

    class Bar(tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "file": io.StringIO(), "disable": False})

        def update(self, n: float | None = 1) -> bool | None:
            shown = super().update(n)
            total = max(1, self.total or 0)
            progress(min(1.0, self.n / total), f"{what} {self.n} of about {total}")
            return shown

    return Bar


def streamed(job: Callable[[Progress], T], pool: NicedThreads | None = None) -> Iterator[tuple]:
    """Run `job(progress)` in a thread of this process (one of `pool`'s, at its nice, when it has one) and yield
    what it reports as it comes: ("progress", fraction, description) tuples, then ("done", its value); its
    exception is raised here.

    What a `@gpu` job returns to report progress: ZeroGPU runs the job in a worker process and passes
    back what a generator yields (pickled), while a callback (a Gradio progress bar) cannot cross over.
    The caller feeds the events to its bar with `drain`."""
    events: queue.Queue = queue.Queue()

    def run() -> None:
        try:
            events.put(("done", job(lambda frac, desc: events.put(("progress", frac, desc)))))
        except BaseException as e:  # raised again in the generator's thread
            events.put(("error", e))

    (pool if pool is not None and pool.nice else OWN_THREAD).submit(run)
    while True:
        event = events.get()
        if event[0] == "error":
            raise event[1]
        yield event
        if event[0] == "done":
            return


def drain(events: Iterable[tuple], progress: Progress | None) -> T:
    """The value of a `streamed` job (through `@gpu` or not), its progress told to `progress` on the way."""
    for event in events:
        if event[0] == "progress" and progress is not None:
            progress(event[1], event[2])
        elif event[0] == "done":
            return event[1]
    raise RuntimeError("The GPU job ended without its result.")
