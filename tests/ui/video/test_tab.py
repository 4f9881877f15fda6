"""The Video tab's own handlers: a file that is not a video is answered with the tab's message (a gr.Error naming
what is accepted), never a traceback in the server's log (issue 49: `make` let VideoError escape)."""

from __future__ import annotations

import logging

import gradio as gr
import pytest

from attention.ui.video import tab as video_tab


def _handler(blocks: gr.Blocks, name: str):
    return next(f.fn for f in blocks.fns.values() if getattr(f.fn, "__name__", "") == name)


def test_a_file_that_is_not_a_video_gets_the_tabs_message_and_no_traceback(tmp_path, caplog):
    with gr.Blocks() as blocks:
        video_tab.build()
    path = tmp_path / "notes.mp4"
    path.write_bytes(b"not a video at all")
    make = _handler(blocks, "make")
    with caplog.at_level(logging.INFO), pytest.raises(gr.Error, match="is not a video FFmpeg can read; accepted"):
        make(str(path), "mnist_vit", -1, 0, "mean", 0.6, "56", None, None, False, False, False)
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
