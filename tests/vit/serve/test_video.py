"""A visitor's attention video as one job: under a ZeroGPU-like wrapper (arguments and what the job
yields cross a process boundary pickled) its progress still reaches the caller's bar and its files
come back; the video is probed once and its preprocessing built once; batch_maps records only the
layers it keeps."""

from __future__ import annotations

import inspect
import pickle

import numpy as np
import pytest
import torch

from attention import videos
from attention.vit.engine import batch, preprocess, rows, video
from attention.vit.models.loader import load_vit
from attention.vit.serve import gpu
from attention.vit.serve import video as visitor
from tests.video_clips import moving_digit


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    path = tmp_path_factory.mktemp("clip") / "digit.mp4"
    moving_digit(path, n=12, fps=10)
    return str(path)


def zero_gpu_like(duration):
    """What ZeroGPU's `spaces.GPU` does to a generator function, as far as this job can tell: its
    arguments are pickled to the worker, each value it yields pickled back (a callback cannot cross)."""

    def wrap(fn):
        assert inspect.isgeneratorfunction(fn), "ZeroGPU streams only what a generator function yields"

        def worker(*args, **kwargs):
            args, kwargs = pickle.loads(pickle.dumps((args, kwargs)))  # a lambda or a gr.Progress fails here
            for value in fn(*args, **kwargs):
                yield pickle.loads(pickle.dumps(value))

        return worker

    return wrap


def test_the_video_job_reports_progress_and_returns_its_files_through_a_zero_gpu_like_wrapper(clip, monkeypatch):
    monkeypatch.setattr(visitor, "_video_job", zero_gpu_like(visitor.VIDEO_GPU_SECONDS)(visitor._video_job))
    told = []
    mp4, npz, facts = visitor.visitor_video(
        clip, "mnist_vit", npz=True, progress=lambda f, d: told.append((f, d)), batch_size=4
    )
    assert told[0][1].startswith("Checking the video") and told[-1][0] == 1.0
    assert [f for f, _ in told] == sorted(f for f, _ in told)
    assert [d for _, d in told[1:]] == [f"Frame {k} of about 12" for k in range(1, 13)]  # the engine's tqdm, per frame
    assert facts["output"]["frames"] == 12 and np.load(npz)["maps"].shape[0] == 12
    assert mp4.endswith(".mp4") and facts["device"] == "cpu"


def test_an_error_inside_the_job_reaches_the_caller_as_itself(clip):
    with pytest.raises(videos.VideoError):
        visitor.visitor_video(clip + ".missing", "mnist_vit")
    events = gpu.streamed(lambda progress: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        gpu.drain(events, None)


def test_a_video_is_probed_once_and_its_preprocessing_built_once(clip, monkeypatch):
    calls = {"probe": 0, "prep": 0}
    probe, of = videos.probe, preprocess.Preprocess.of.__func__

    def counted_probe(*a, **k):
        calls["probe"] += 1
        return probe(*a, **k)

    def counted_of(cls, *a, **k):
        calls["prep"] += 1
        return of(cls, *a, **k)

    monkeypatch.setattr(videos, "probe", counted_probe)
    monkeypatch.setattr(preprocess.Preprocess, "of", classmethod(counted_of))
    run = video.attention_video(load_vit("mnist_vit"), clip, batch_size=4)
    assert sum(1 for _ in run) == 12
    assert calls == {"probe": 1, "prep": 1}


def test_batch_maps_records_only_the_layer_it_keeps_and_the_kernels_scale(monkeypatch):
    model = load_vit("mnist_vit")
    computed = []
    scores = rows.batch_scores
    monkeypatch.setattr(rows, "batch_scores", lambda *a: computed.append(a[3]) or scores(*a))
    xs = torch.rand(2, 1, 28, 28)  # grey 28x28 digits
    one = batch.batch_maps(model, xs, layer=1)
    assert len(computed) == 1  # one layer's rows computed, not every layer's
    every = batch.batch_maps(model, xs, layer=1, every_layer=True)
    np.testing.assert_allclose(one[0].scores[0], every[0].scores[1], rtol=1e-6)
    assert one[0].scale == pytest.approx(computed[0]) == pytest.approx(model.blocks[1].attn.head_dim ** -0.5)


@pytest.mark.skipif(torch.cuda.is_available(), reason="on CUDA the heavy lane leaves torch's threads as they are")
@pytest.mark.parametrize("nice", [0, 6])
def test_the_video_computes_in_its_own_thread_with_the_heavy_lanes_torch_threads_and_nice(clip, monkeypatch, nice):
    """ATTENTION_HEAVY_NICE 0: a thread of its own per job, as before; else one of the heavy lane's threads at that
    nice (its progress told as before)."""
    import threading

    from attention.crowd.admission import HEAVY
    from attention.crowd.threads import NicedThreads, thread_nice

    main = torch.get_num_threads()
    monkeypatch.setattr(HEAVY, "threads", main + 1)  # neither the main thread's nor a new thread's default
    monkeypatch.setattr(HEAVY, "pool", NicedThreads(nice))
    seen = []
    real = visitor.write_video

    def spy(*args, **kwargs):  # where the frames are decoded and their forwards run, in the job's thread
        seen.append((threading.current_thread().name, torch.get_num_threads(), thread_nice()))
        return real(*args, **kwargs)

    monkeypatch.setattr(visitor, "write_video", spy)
    told = []
    visitor.visitor_video(clip, "mnist_vit", batch_size=4, progress=lambda f, d: told.append(f))
    assert seen == [("gpu-job" if nice == 0 else f"heavy-nice{nice}-1", main + 1, nice)]
    assert torch.get_num_threads() == main and thread_nice() == 0
    assert told[-1] == 1.0
