"""attention.vit.engine.video: a synthetic clip (a digit crossing a black frame) through the shipped
mnist_vit: the attention follows the digit, batching changes no map, the MP4 has the right frames,
rate and size, and runs over the budget are refused before any forward with what fits."""

from __future__ import annotations

import av
import numpy as np
import pytest

from attention import videos
from attention.errors import BudgetError, InputError
from attention.vit.engine.extract import attention_maps
from attention.vit.engine.video import attention_video, write_video
from attention.vit.models.loader import load_vit
from tests.video_clips import encode, four_hours, levels, moving_digit

# mnist_vit (patch 4, trained on centred 28x28 digits) on a 112x56 frame at native size: a 14x28 grid.
# Layer 2's head 3 is the one of its 16 heads whose CLS row peaks on the digit wherever it is
# (measured: every frame within 6.3 px of the digit's centre; the mean of heads of the last layer does
# not track a digit off the centre the model was trained on).
TRACKING = dict(layer=2, head=3)


@pytest.fixture(scope="module")
def mnist():
    return load_vit("mnist_vit")


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    path = tmp_path_factory.mktemp("clip") / "digit.mp4"
    centres = moving_digit(path, n=20, fps=10)
    return str(path), centres


def test_every_frames_attention_peak_follows_the_digit(mnist, clip):
    path, centres = clip
    frames = list(attention_video(mnist, path, resolution="native", layer=TRACKING["layer"], batch_size=8))
    assert [f.index for f in frames] == list(range(20))
    dist = []
    for f in frames:
        m = f.maps[TRACKING["head"]]
        r, c = np.unravel_index(m.argmax(), m.shape)
        dist.append(float(np.hypot(r * 4 + 2 - centres[f.index][0], c * 4 + 2 - centres[f.index][1])))
    print("per-frame distance of the peak to the digit's centre, px:", [round(d, 1) for d in dist])
    assert max(dist) <= 8.0  # two patches; the digit is 28 px wide and moves 80 px
    peaks_x = [int(np.argmax(f.maps[TRACKING["head"]].max(0))) for f in frames]
    assert peaks_x[-1] - peaks_x[0] >= 16  # it moved with the digit (80 px = 20 columns)


def test_batched_maps_equal_attention_maps_on_each_frame_alone(mnist, clip):
    path, _ = clip
    decoded = list(videos.frames(path))
    for f in attention_video(mnist, path, resolution="native", layer=-1, batch_size=6):
        alone = attention_maps(mnist, decoded[f.source_index].rgb, resolution="native", layer=-1)
        assert f.batch.grid == alone.grid
        np.testing.assert_allclose(f.batch.weights[0], alone.weights[-1], atol=1e-5, rtol=0)  # all N tokens
        np.testing.assert_allclose(f.maps, alone.maps, atol=1e-5, rtol=0)
        assert np.array_equal(np.asarray(f.image), np.asarray(alone.image))


def test_the_mp4_has_the_right_frames_rate_and_size(mnist, clip, tmp_path):
    path, _ = clip
    facts = write_video(
        attention_video(mnist, path, resolution="native", fps=5), tmp_path / "o.mp4", view="fig3", side_by_side=True
    )
    with av.open(str(tmp_path / "o.mp4")) as c:
        s = c.streams.video[0]
        got = [f.to_ndarray(format="rgb24") for f in c.decode(s)]
        assert s.average_rate == 5 and s.codec_context.name == "h264"
        assert not c.streams.audio
    # 2 s at 5 fps; 112x56 frames drawn 4x (shorter side >= 224 px), the frame beside the view
    assert len(got) == facts["output"]["frames"] == 10
    assert got[0].shape == (224, 896, 3)
    assert facts["output"] == {"frames": 10, "fps": 5.0, "width": 896, "height": 224}
    assert got[0][:, :448].mean() < got[0][:, 448:].mean()  # left: the black frame; right: masks in colour


def test_stacked_draws_the_frame_above_its_attention(mnist, clip):
    """side_by_side="stacked" (a phone's narrow page): the frame on top, the view under it, one width."""
    path, _ = clip
    f = next(iter(attention_video(mnist, path, resolution="native", fps=5)))
    beside = f.picture("fig3", side_by_side=True)
    stacked = f.picture("fig3", side_by_side="stacked")
    assert beside.shape == (224, 896, 3) and stacked.shape == (448, 448, 3)
    assert np.array_equal(stacked[:224], beside[:, :448]) and np.array_equal(stacked[224:], beside[:, 448:])


def test_npz_holds_every_frames_raw_maps(mnist, clip, tmp_path):
    path, _ = clip
    run = attention_video(mnist, path, resolution="native", threshold=0.5, fps=20)
    write_video(run, tmp_path / "o.mp4", view="mean", npz=tmp_path / "m.npz")
    d = np.load(tmp_path / "m.npz")
    assert d["maps"].shape == (40, 4, 14, 28) and d["maps"].dtype == np.float32
    assert d["masks"].shape == (40, 4, 14, 28) and d["masks"].dtype == bool
    assert list(d["source_index"][:4]) == [0, 0, 1, 1]  # 20 fps from a 10 fps clip: each frame twice
    np.testing.assert_allclose(d["mean"], d["maps"].mean(1), atol=1e-6)
    assert float(d["fps"]) == 20 and list(d["grid"]) == [14, 28] and list(d["query"]) == [-1, -1]


def test_a_patch_query_and_every_view(mnist, clip, tmp_path):
    path, _ = clip
    run = attention_video(mnist, path, resolution="native", query=(7, 10), seconds=0.3)
    for view in ("mean", "head", "masks", "fig3"):
        facts = write_video(run, tmp_path / f"{view}.mp4", view=view, head=1)
        assert facts["output"]["frames"] == 3 and facts["query"] == [7, 10]
    with pytest.raises(InputError, match="off the 14x28 grid"):
        attention_video(mnist, path, resolution="native", query=(20, 0))
    with pytest.raises(InputError, match="Unknown video view"):
        write_video(run, tmp_path / "x.mp4", view="rollout")


def test_a_four_hour_video_is_refused_up_front_with_what_fits(mnist, tmp_path):
    four_hours(tmp_path / "long.mp4")  # 1 fps: 14,400 frames
    with pytest.raises(BudgetError, match=r"14,400 frames .* cap of 600 .* first 600.0 s at 1 fps"):
        attention_video(mnist, tmp_path / "long.mp4", max_frames=600)
    with pytest.raises(BudgetError, match=r"first 20.0 s at 30 fps"):
        attention_video(mnist, tmp_path / "long.mp4", fps=30, max_frames=600)
    run = attention_video(mnist, tmp_path / "long.mp4", seconds=5, max_frames=600)  # what fits, fits
    assert len(list(run)) == 5


def test_over_the_compute_budget_names_the_length_rate_and_size_that_fit(mnist, clip):
    path, _ = clip
    run = attention_video(mnist, path, resolution="native")
    fits = r"budget .* What fits: the first 0.6 s, or 3 fps over the whole video, or a resolution up to \d+ px"
    with pytest.raises(BudgetError, match=fits):
        attention_video(mnist, path, resolution="native", max_gflop=run.gflop / 3)


def test_8k_frames_give_a_bounded_correct_result(mnist, tmp_path):
    a = np.zeros((4320, 7680, 3), np.uint8)
    a[2000:2300, 3700:4000] = 255
    src = encode(tmp_path / "8k.mp4", [a])
    run = attention_video(mnist, src, resolution=56)
    assert (run.info.width, run.info.height) == (3840, 2160)  # scaled to the decode cap
    (f,) = list(run)
    assert f.batch.grid == (14, 25)  # 56 px high: 100 px wide, a 14x25 grid of 4 px patches


def test_a_gif_and_a_variable_rate_clip_go_through(mnist, tmp_path):
    from PIL import Image

    ims = [Image.fromarray(a) for a in levels(3, size=(56, 28))]
    ims[0].save(tmp_path / "a.gif", save_all=True, append_images=ims[1:], duration=[100, 300, 200], loop=0)
    assert len(list(attention_video(mnist, tmp_path / "a.gif", fps=10))) == 6
    src = encode(tmp_path / "vfr.mp4", levels(5, size=(56, 28)), pts_ms=[0, 100, 150, 500, 900], fps=5)
    facts = write_video(attention_video(mnist, src, fps=10), tmp_path / "o.mp4")
    assert facts["output"]["frames"] == 11 and facts["forwards_planned"] <= 11


def test_a_stream_holding_more_than_its_headers_said_stops_at_the_budget(mnist, clip):
    import dataclasses

    path, _ = clip
    run = attention_video(mnist, path, resolution="native", batch_size=4)
    per_frame = run.gflop / run.forwards
    lied = dataclasses.replace(run, forwards=2, gflop=2 * per_frame, max_gflop=6 * per_frame)  # "2 frames"
    got = []
    with pytest.raises(BudgetError, match="more frames than its headers said: 8 frames so far"):
        for f in lied:
            got.append(f.index)
    assert got == [0, 1, 2, 3]  # the first batch of 4 fit; the second would pass 6 frames' compute


def test_the_progress_is_one_tqdm_made_with_the_planned_frames_and_advanced_once_per_frame(mnist, clip):
    from tqdm import tqdm

    made = []

    class Recording(tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "disable": True})
            self.kwargs, self.seen = kwargs, []
            made.append(self)

        def update(self, n=1):
            self.seen.append((n, len(got)))  # frames handed out before this tick
            return super().update(n)

        def close(self):
            self.seen.append(("closed", len(got)))
            return super().close()

    run = attention_video(mnist, clip[0], resolution="native", fps=5, batch_size=3, bar=Recording)
    got = []
    for f in run:
        got.append(f)
    assert len(made) == 1 and made[0].kwargs["total"] == run.frames == len(got) == 10
    assert made[0].seen[:11] == [(1, k) for k in range(1, 11)] + [("closed", 10)]  # a tick per frame drawn, closed
    made.clear()  # gone before Gradio's track_tqdm patches tqdm (the UI's import) in this process


def test_an_output_rate_above_the_sources_runs_each_decoded_frame_once_and_to_its_estimate(mnist, tmp_path):
    """Issue 49: an 18-frame clip at 120 fps was accepted, then refused mid-way ("22 frames so far"): a source frame
    shown on both sides of a batch's end was run, and counted, twice. Now each decoded frame is run once, so a
    budget of exactly the estimate runs to the end."""
    from attention.vit.engine import video as engine_video

    src = encode(tmp_path / "c18.mp4", _distinct(18), fps=30)
    run = attention_video(mnist, src, fps=120, resolution=32, batch_size=8)
    assert (run.frames, run.forwards) == (72, 18)
    run = attention_video(mnist, src, fps=120, resolution=32, batch_size=8, max_gflop=run.gflop)
    ran, real = [], engine_video.batch_maps
    engine_video.batch_maps = lambda m, x, **kw: (ran.append(len(x)), real(m, x, **kw))[1]
    try:
        got = [(f.index, f.source_index) for f in run]
    finally:
        engine_video.batch_maps = real
    assert len(got) == 72 and sum(ran) == 18 and [s for _, s in got] == [i // 4 for i in range(72)]


def test_the_seconds_a_decoding_refusal_names_are_the_seconds_it_accepts(mnist, tmp_path):
    """Issue 49: a 5990x5990 GIF with seconds=11 at fps 0.1 was refused while the message said "the first 11.1 s"
    fit (its part was taken as 2 frames x 10 s). The same rule, scaled down: a 64x64 GIF at 50 fps under a
    decoding bound of 557 frames' pixels: 11 s at 0.1 fps is accepted and decodes to the end; 12 s is refused
    naming 11.1 s, and 11.1 s is accepted."""
    from PIL import Image

    from attention.video_container import DECODE

    ims = [Image.fromarray(a) for a in _distinct(700)]  # distinct, or the GIF writer merges them
    ims[0].save(tmp_path / "g.gif", save_all=True, append_images=ims[1:], duration=20, loop=0)
    before = DECODE.gpixels
    object.__setattr__(DECODE, "gpixels", 557 * 64 * 64 / 1e9)  # frozen: the server's setting, scaled down
    try:
        assert [f.time for f in attention_video(mnist, tmp_path / "g.gif", fps=0.1, seconds=11)] == [0.0, 10.0]
        with pytest.raises(BudgetError, match=r"What fits: the first 11\.1 s\.") as e:
            attention_video(mnist, tmp_path / "g.gif", fps=0.1, seconds=12)
        fit = float(str(e.value).split("the first ")[-1].split(" s")[0])
        assert len(list(attention_video(mnist, tmp_path / "g.gif", fps=0.1, seconds=fit))) == 2
    finally:
        object.__setattr__(DECODE, "gpixels", before)


def _distinct(n: int, side: int = 64) -> list[np.ndarray]:
    """n flat frames of side x side px, each a colour of its own."""
    return [np.full((side, side, 3), (i % 256, (i // 256) * 60, 128), np.uint8) for i in range(n)]
