"""/attention_video through gradio_client: the MP4 (right frames, rate, size), the .npz on request,
the facts; a file that is not a video gets its message and the server keeps serving; concurrent
callers each get their own video."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import av
import numpy as np
import pytest
from gradio_client import handle_file

from attention.ui.video.tab import DIGITS_CLIP
from tests.video_clips import four_hours


def call(client, path=DIGITS_CLIP, **kw):
    kw = {"model": "mnist_vit", "resolution": "native", **kw}
    return client.predict(handle_file(path), **kw, api_name="/attention_video")


def decoded(path) -> tuple[int, float, tuple[int, int]]:
    with av.open(path) as c:
        s = c.streams.video[0]
        n = sum(1 for _ in c.decode(s))
        return n, float(s.average_rate), (s.codec_context.width, s.codec_context.height)


def test_attention_video_answers_the_mp4_the_npz_and_the_facts(client):
    video, maps, info = call(client, fps=5, npz=True, side_by_side=True, view="fig3")
    path = video["video"] if isinstance(video, dict) else video
    assert path.endswith(".mp4")
    assert decoded(path) == (20, 5.0, (896, 224))  # 4 s at 5 fps; 112x56 drawn 4x, frame beside the view
    d = np.load(maps)
    assert d["maps"].shape == (20, 4, 14, 28) and d["maps"].dtype == np.float32
    assert info["output"] == {"frames": 20, "fps": 5.0, "width": 896, "height": 224}
    assert info["model"] == "mnist_vit" and info["source"]["fps"] == 10.0 and info["view"] == "fig3"


def test_the_tabs_estimate_reads_the_request_as_the_run_does(client):
    """The Video tab's estimate (`estimate_of`) prices the frames the run makes, empty fields read alike."""
    from attention.ui.video.api import estimate_of

    est = estimate_of(DIGITS_CLIP, "mnist_vit", None, "native", float("nan"), 1.5, False)
    video, maps, info = call(client, layer=None, fps=None, seconds=1.5)
    assert est.frames == info["output"]["frames"] == 15 and list(est.grid) == list(info["grid"])


def test_no_npz_unless_asked(client):
    video, maps, info = call(client, seconds=1)
    assert maps is None and info["output"]["frames"] == 10


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a video at all", "is not a video FFmpeg can read; accepted: MP4"),
        (b"\x00\x00\x00\x18ftypmp42" + bytes(300), "not a video FFmpeg can read"),
    ],
)
def test_not_a_video_gets_its_message_and_the_server_keeps_serving(client, tmp_path, content, message):
    bad = tmp_path / "clip.mp4"
    bad.write_bytes(content)
    with pytest.raises(Exception, match=message):
        call(client, path=str(bad))
    assert call(client, seconds=0.5)[2]["output"]["frames"] == 5


def test_a_four_hour_video_is_refused_with_what_fits_and_the_server_keeps_serving(client, tmp_path):
    with pytest.raises(Exception, match=r"14,400 frames at 1 fps .* What fits: the first 600.0 s at 1 fps"):
        call(client, path=four_hours(tmp_path / "long.mp4"))
    assert call(client, seconds=0.5)[2]["output"]["frames"] == 5


def test_bad_parameters_get_their_message(client):
    with pytest.raises(Exception, match="Frame rate 500.0 is out of range"):
        call(client, fps=500)
    with pytest.raises(Exception, match="Unknown video view"):
        call(client, view="rollout")
    with pytest.raises(Exception, match="Layer 9 is out of range"):
        call(client, layer=9)


def test_concurrent_callers_each_get_their_own_video(visitor_client):
    clients = {f: visitor_client(300 + f) for f in [2, 5, 10]}  # three visitors
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda f: (f, call(clients[f], fps=f, seconds=2)), [2, 5, 10]))
    for f, (video, _, info) in answers:
        path = video["video"] if isinstance(video, dict) else video
        assert decoded(path)[:2] == (2 * f, float(f)) and info["output"]["frames"] == 2 * f


def test_the_video_tool_describes_every_parameter_and_the_tab_event_is_no_tool(app_url):
    from tests.ui.common.test_mcp import schema

    tools = schema(app_url)
    assert "make" not in tools
    props = tools["attention_video"]["inputSchema"]["properties"]
    assert set(props) == {"video", "model", "layer", "head", "view", "threshold", "resolution", "fps", "seconds"} | {
        "side_by_side",
        "npz",
        "query_row",
        "query_col",
    }
    for name, prop in props.items():
        if name != "video":
            assert len(prop["description"]) > 20, name
