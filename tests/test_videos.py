"""attention.videos: decoding at a constant rate (variable rates and GIFs included), rotation,
the decode size cap, H.264 output, and a clear VideoError for everything that is not a video."""

from __future__ import annotations

import re

import av
import numpy as np
import pytest
from PIL import Image

from attention import videos
from attention.errors import VideoError
from tests.video_clips import encode, level_index, levels


def test_write_mp4_is_h264_with_the_frames_rate_and_size(tmp_path):
    pics = levels(7, size=(33, 17))  # odd sides: padded to even for 4:2:0
    n = videos.write_mp4(tmp_path / "o.mp4", pics, 12.5)
    with av.open(str(tmp_path / "o.mp4")) as c:
        s = c.streams.video[0]
        got = [f.to_ndarray(format="rgb24") for f in c.decode(s)]
        assert (s.codec_context.name, s.codec_context.pix_fmt) == ("h264", "yuv420p")
        assert s.average_rate == 12.5
    assert n == len(got) == 7
    assert got[0].shape == (18, 34, 3)
    assert [level_index(g[:17, :33]) for g in got] == list(range(7))


def test_frames_at_the_source_rate_and_at_a_chosen_one(tmp_path):
    src = encode(tmp_path / "a.mp4", levels(10), fps=10)
    same = list(videos.frames(src))
    assert [level_index(f.rgb) for f in same] == list(range(10))
    assert [round(f.time, 6) for f in same] == [round(k / 10, 6) for k in range(10)]
    slower = list(videos.frames(src, fps=4))  # 1 s at 4 fps: the frame on screen at 0, .25, .5, .75 s
    assert [f.source_index for f in slower] == [0, 2, 5, 7]
    assert [level_index(f.rgb) for f in slower] == [0, 2, 5, 7]
    faster = list(videos.frames(src, fps=20))
    assert [f.source_index for f in faster] == [k // 2 for k in range(20)]


def test_variable_frame_rate_is_resampled_to_the_frame_on_screen(tmp_path):
    pts = [0, 100, 150, 500, 900]  # ms; the last frame lasts 0.2 s (the stream's nominal 5 fps): 1.1 s
    src = encode(tmp_path / "vfr.mp4", levels(5), pts_ms=pts, fps=5)
    out = list(videos.frames(src, fps=10))
    expected = [max(i for i, t in enumerate(pts) if t <= k * 100) for k in range(len(out))]
    assert [level_index(f.rgb) for f in out] == expected
    assert len(out) == 11 == round(videos.probe(src).duration * 10)


def test_a_gif_keeps_each_frames_duration(tmp_path):
    ims = [Image.fromarray(a) for a in levels(3)]
    ims[0].save(tmp_path / "a.gif", save_all=True, append_images=ims[1:], duration=[100, 300, 200], loop=0)
    out = list(videos.frames(tmp_path / "a.gif", fps=10))
    assert [level_index(f.rgb) for f in out] == [0, 1, 1, 1, 2, 2]


@pytest.mark.parametrize("rotation", [90, -90, 180])
def test_rotation_metadata_is_applied(tmp_path, rotation):
    a = np.zeros((32, 64, 3), np.uint8)
    a[:8, :8] = 255  # a white corner, top-left as stored
    src = encode(tmp_path / "r.mp4", [a, a], rotation=rotation)
    info = videos.probe(src)
    want = np.rot90(a, rotation // 90)  # the display matrix rotates counter-clockwise
    assert (info.height, info.width) == want.shape[:2]
    got = next(iter(videos.frames(src))).rgb
    assert np.abs(got.astype(int) - want).max() < 40


def test_huge_frames_are_scaled_down_while_decoding(tmp_path):
    a = np.zeros((4320, 7680, 3), np.uint8)  # 8K
    a[:2160, :3840] = 200
    src = encode(tmp_path / "8k.mp4", [a])
    info = videos.probe(src, max_pixels=1920 * 1080)
    assert (info.width, info.height, info.scaled) == (1920, 1080, True)
    (f,) = videos.frames(src, max_pixels=1920 * 1080)
    assert f.rgb.shape == (1080, 1920, 3)
    assert f.rgb[:500, :900].mean() > 180 and f.rgb[600:, 1000:].mean() < 20


def test_not_a_video_no_frames_audio_only_and_missing_files_are_named(tmp_path):
    (tmp_path / "notes.mp4").write_text("hello, not a video")
    with pytest.raises(VideoError, match="not a video FFmpeg can read; accepted: MP4"):
        videos.probe(tmp_path / "notes.mp4")
    with av.open(str(tmp_path / "empty.mp4"), "w") as c:  # a header, no frames
        s = c.add_stream("libx264", rate=10)
        s.width = s.height = 16
        s.pix_fmt = "yuv420p"
        c.start_encoding()
    with pytest.raises(VideoError, match="no video frames"):
        videos.probe(tmp_path / "empty.mp4")
    with av.open(str(tmp_path / "audio.mp4"), "w") as c:
        s = c.add_stream("aac", rate=44100)
        fr = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
        fr.sample_rate, fr.pts = 44100, 0
        c.mux(s.encode(fr))
        c.mux(s.encode(None))
    with pytest.raises(VideoError, match="no video"):
        videos.probe(tmp_path / "audio.mp4")
    with pytest.raises(VideoError, match="No such video file"):
        videos.probe(tmp_path / "absent.mp4")


def test_a_corrupt_stream_stops_with_an_error_after_only_correct_frames(tmp_path):
    """Damage mid-stream is reported (VideoError naming the file and how far it got), never skipped: every
    frame given before it is the source's own (its level), and a truncated file is refused by name."""
    src = encode(tmp_path / "ok.mp4", levels(10) * 3, fps=10)
    data = bytearray(open(src, "rb").read())
    rng = np.random.default_rng(0)
    mid = len(data) // 2
    data[mid : mid + 200] = rng.integers(0, 256, 200, dtype=np.uint8).tobytes()
    (tmp_path / "bad.mp4").write_bytes(bytes(data))
    (tmp_path / "cut.mp4").write_bytes(bytes(data[: len(data) // 3]))
    got = []
    with pytest.raises(VideoError, match=r"bad\.mp4's video stream is corrupt after (\d+) frames") as e:
        for f in videos.frames(tmp_path / "bad.mp4"):
            got.append(f)
    after = int(re.search(r"after (\d+) frames", str(e.value)).group(1))
    assert 0 < len(got) <= after < 30  # stopped at the damage, not at the end
    assert all(f.rgb.shape == (16, 32, 3) and level_index(f.rgb) == f.source_index % 10 for f in got)
    with pytest.raises(VideoError, match=r"cut\.mp4"):
        list(videos.frames(tmp_path / "cut.mp4"))


def test_a_stream_longer_than_its_cap_stops_with_a_clear_error(tmp_path):
    src = encode(tmp_path / "a.mp4", levels(10), fps=10)
    with pytest.raises(VideoError, match="more than 4 frames"):
        list(videos.frames(src, max_frames=4))
    assert len(list(videos.frames(src, seconds=0.4))) == 4


def test_fps_out_of_range_is_refused(tmp_path):
    src = encode(tmp_path / "a.mp4", levels(3), fps=10)
    for bad in (0, -5, 1000, "fast"):
        with pytest.raises(VideoError, match="accepted: 0.1 to 120"):
            list(videos.frames(src, fps=bad))


def test_the_shipped_clips_decode_are_small_and_credited():
    from attention.config import EXAMPLES_DIR

    credits = (EXAMPLES_DIR / "CREDITS.md").read_text()
    clips = sorted((EXAMPLES_DIR / "videos").glob("*.mp4"))
    assert [c.name for c in clips] == ["chelsea.mp4", "digits.mp4"]
    for clip in clips:
        assert f"`videos/{clip.name}`" in credits
        assert clip.stat().st_size < 500_000
        info = videos.probe(clip)
        assert info.codec == "h264" and info.frames == 40 and float(info.fps) == 10


def test_a_clip_with_sound_gives_its_frames_and_the_output_has_none(tmp_path):
    pics = levels(5)
    with av.open(str(tmp_path / "talk.mp4"), "w") as c:  # video and an AAC track, interleaved
        v = c.add_stream("libx264", rate=10)
        v.height, v.width = pics[0].shape[:2]
        v.pix_fmt = "yuv420p"
        a = c.add_stream("aac", rate=44100)
        for i, p in enumerate(pics):
            f = av.VideoFrame.from_ndarray(p, format="rgb24")
            f.pts = i
            c.mux(v.encode(f))
            s = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            s.sample_rate, s.pts = 44100, i * 1024
            c.mux(a.encode(s))
        c.mux(v.encode(None))
        c.mux(a.encode(None))
    out = list(videos.frames(tmp_path / "talk.mp4"))
    assert [level_index(f.rgb) for f in out] == list(range(5))
    videos.write_mp4(tmp_path / "o.mp4", [f.rgb for f in out], 10)
    with av.open(str(tmp_path / "o.mp4")) as c:
        assert len(c.streams.video) == 1 and not c.streams.audio
