"""Spec of attention.videos' decoding bounds (issue 32): the canvas priced from the headers before any frame is
decoded (the 1x1-frame GIF on a huge canvas), pixels and seconds of decoding bounded while decoding, only the
frames shown converted to RGB, playlists and files that name other files refused."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from attention import video_container, videos
from attention.errors import BudgetError, VideoError
from tests.video_clips import moving_digit


def canvas_gif(path, side: int, frames: int = 3) -> str:
    """An animated GIF whose frames are 1x1 px on a `side` x `side` canvas (a few bytes a frame), written by
    hand: no full canvas is ever made here."""
    import struct

    out = [b"GIF89a", struct.pack("<HHBBB", side, side, 0x80, 0, 0), b"\x00\x00\x00\xff\xff\xff"]
    for i in range(frames):
        out.append(b"\x21\xf9\x04\x00" + struct.pack("<H", 10) + b"\x00\x00")  # 0.1 s a frame
        out.append(b"\x2c" + struct.pack("<HHHHB", i % side, i % side, 1, 1, 0))
        out.append(b"\x02\x02\x4c\x01\x00")  # LZW: clear, pixel 1, end (3-bit codes)
    out.append(b"\x3b")
    with open(path, "wb") as f:
        f.write(b"".join(out))
    return str(path)


def test_a_gif_of_1x1_frames_on_a_huge_canvas_is_refused_before_a_frame_is_decoded(tmp_path):
    path = canvas_gif(tmp_path / "canvas.gif", 6000)
    assert os.path.getsize(path) < 200_000
    small = dataclasses.replace(videos.DECODE, pixels=20_000_000)
    with pytest.raises(BudgetError, match=r"6,000x6,000 px \(its canvas\), over this server's 20,000,000 pixels"):
        videos.probe(path, limits=small)
    with pytest.raises(BudgetError, match="its canvas"):
        next(videos.frames(path, limits=small))
    assert videos.probe(path, limits=dataclasses.replace(small, pixels=40_000_000)).source_size == (6000, 6000)


def test_decoding_stops_at_its_pixel_budget(tmp_path):
    clip = str(tmp_path / "d.mp4")
    moving_digit(clip, n=20, fps=10, size=(112, 56))
    limits = dataclasses.replace(videos.DECODE, gpixels=112 * 56 * 5 / 1e9)  # 5 frames' worth
    with pytest.raises(BudgetError, match="Decoding d.mp4 took over this server's bound"):
        list(videos.frames(clip, limits=limits))
    assert len(list(videos.frames(clip))) == 20


def test_only_the_frames_shown_are_converted(tmp_path, monkeypatch):
    clip = str(tmp_path / "d.mp4")
    moving_digit(clip, n=20, fps=10)
    converted = []
    real = videos._rgb
    monkeypatch.setattr(videos, "_rgb", lambda f, info: converted.append(1) or real(f, info))
    out = list(videos.frames(clip, fps=1))  # 2 s at 1 fps: 2 of the 20 source frames shown
    assert len(out) == 2 and len(converted) == 2


@pytest.mark.parametrize(
    "text",
    [
        "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:1.0,\n{clip}\n#EXT-X-ENDLIST\n",
        "ffconcat version 1.0\nfile {clip}\n",
    ],
)
def test_a_playlist_naming_a_local_video_is_refused(tmp_path, text):
    clip = str(tmp_path / "d.mp4")
    moving_digit(clip, n=5)
    playlist = tmp_path / "list.m3u8"
    playlist.write_text(text.format(clip=clip))
    with pytest.raises(VideoError, match="playlist or a list of other files"):
        videos.probe(playlist)


def test_a_playlist_past_the_sniffing_is_refused_by_the_demuxer_whitelist(tmp_path, monkeypatch):
    clip = str(tmp_path / "d.mp4")
    moving_digit(clip, n=5)
    playlist = tmp_path / "list.m3u8"
    playlist.write_text(f"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:1.0,\n{clip}\n#EXT-X-ENDLIST\n")
    monkeypatch.setattr(video_container, "PLAYLIST_HEADS", (b"\0never",))
    with pytest.raises(VideoError, match="not a video FFmpeg can read"):
        videos.probe(playlist)
    assert np.asarray(next(videos.frames(clip)).rgb).shape[2] == 3
