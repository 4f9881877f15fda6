"""Spec of the admission of computing endpoints on the launched app (issue 32): per visitor (session and
client address together) one job running and ATTENTION_VISITOR_QUEUED waiting, the rest refused at once
with why and when to retry, while another visitor is served; jobs priced before they start; results of a
visitor's own picture not shared; file values that name a URL or a server path refused on every file input;
MCP callers as visitors of their own; messages cut."""

from __future__ import annotations

import contextlib
import time

import httpx
import numpy as np
import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError, ValidationError
from PIL import Image

import app
from attention.config import SETTINGS
from attention.ui.video_tab import DIGITS_CLIP
from tests.conftest import DIGIT


def _noise(tmp_path, i: int, side: int = 64) -> str:
    path = tmp_path / f"noise_{i}.png"
    Image.fromarray((np.random.default_rng(i).random((side, side)) * 255).astype("uint8")).save(path)
    return str(path)


def _outcomes(jobs) -> list[str]:
    out = []
    for j in jobs:
        try:
            j.result(timeout=600)
            out.append("done")
        except ValidationError as e:  # at the queue's door: never queued
            assert "Not queued" in str(e) and "Try again in about" in str(e), str(e)
            out.append("refused")
        except AppError as e:
            out.append(f"error: {e}")
    return out


@pytest.mark.parametrize("endpoint", ["/relevance", "/attention_video"])
def test_one_visitor_from_many_sessions_gets_one_running_and_the_stated_few_waiting(visitor_client, tmp_path, endpoint):
    """12 jobs at once from one client address over 4 sessions (threads and clients at once): 1 + 2 admitted,
    9 refused at once; another visitor meanwhile is served."""
    sessions = [visitor_client(7) for _ in range(4)]  # one client address: one visitor
    if endpoint == "/relevance":
        jobs = [
            sessions[i % 4].submit(handle_file(_noise(tmp_path, i, 160)), "mnist_vit", "", "256", api_name=endpoint)
            for i in range(12)
        ]
    else:
        jobs = [sessions[i % 4].submit(handle_file(DIGITS_CLIP), "mnist_vit", api_name=endpoint) for i in range(12)]
    t0 = time.monotonic()
    other = visitor_client(8).predict(handle_file(DIGIT), "mnist_vit", api_name="/relevance")
    assert other[2]["target"]["index"] == 3
    outcomes = _outcomes(jobs)
    admitted = 1 + SETTINGS.visitor_queued
    assert outcomes.count("done") == admitted and outcomes.count("refused") == 12 - admitted, outcomes
    assert time.monotonic() - t0 < 600


def test_relevance_and_video_share_one_visitors_share(visitor_client, tmp_path):
    from attention.serving.admission import HEAVY
    from attention.serving.visitors import Visitor

    c = visitor_client(9)
    # every heavy slot held by someone else while the six are sent: none can finish before the last arrives
    # (else a fast first job makes room for a later one and the count depends on the machine's speed)
    with contextlib.ExitStack() as held:
        for i in range(HEAVY.slots):
            held.enter_context(HEAVY.turn(Visitor(f"holder{i}", f"10.9.9.{i}")))
        jobs = [c.submit(handle_file(DIGITS_CLIP), "mnist_vit", api_name="/attention_video") for _ in range(2)]
        jobs += [c.submit(handle_file(_noise(tmp_path, 50 + i)), api_name="/relevance") for i in range(4)]
        deadline = time.monotonic() + 60
        while sum(j.done() for j in jobs) < 3 and time.monotonic() < deadline:  # the refusals come at once
            time.sleep(0.05)
    outcomes = _outcomes(jobs)
    assert outcomes.count("done") == 1 + SETTINGS.visitor_queued and outcomes.count("refused") == 3, outcomes


def test_a_high_token_relevance_is_refused_before_it_runs_naming_what_fits(client):
    t0 = time.monotonic()
    with pytest.raises(Exception, match=r"GFLOP per relevance job.*The largest resolution accepted") as e:
        client.predict(handle_file(DIGIT), "mnist_vit", "", "512", api_name="/relevance")
    assert time.monotonic() - t0 < 20, "priced before it ran"
    assert "16,384 patch tokens" in str(e.value)


def test_a_visitors_own_picture_gets_a_relevance_of_their_own(tmp_path):
    from attention.serving.visitors import Visitor
    from attention.vit.relevance.service import RESULTS, get_relevance

    path = _noise(tmp_path, 99)
    before = RESULTS.computed
    a = get_relevance(path, "mnist_vit", visitor=Visitor("a", "10.1.0.1"))
    assert get_relevance(path, "mnist_vit", visitor=Visitor("a", "10.1.0.1")) is a
    b = get_relevance(path, "mnist_vit", visitor=Visitor("b", "10.1.0.2"))
    assert b is not a and RESULTS.computed == before + 2  # b's timing is b's own: nothing to learn about a
    e1 = get_relevance(DIGIT, "mnist_vit", visitor=Visitor("a", "10.1.0.1"))
    assert get_relevance(DIGIT, "mnist_vit", visitor=Visitor("b", "10.1.0.2")) is e1  # a shipped example: shared


def _video_tab_fns() -> list[tuple[int, int]]:
    """(fn_index, number of inputs) of the Video tab's events whose first input is its video."""
    import gradio as gr

    fns = [
        (f._id, len(f.inputs))
        for f in app.demo.fns.values()
        if f.inputs and isinstance(f.inputs[0], gr.Video) and f.inputs[0].interactive is not False
    ]
    assert fns
    return fns


URLS = [
    {"path": "http://example.com/cat.mp4", "meta": {"_type": "gradio.FileData"}},
    {"path": "/etc/hostname", "url": "data:video/mp4;base64,AAAA", "meta": {"_type": "gradio.FileData"}},
    {"path": "https://example.com/x.mp4", "url": "https://example.com/x.mp4", "meta": {"_type": "gradio.FileData"}},
    {"path": "data:video/mp4;base64,AAAA", "meta": {"_type": "gradio.FileData"}},
]


@pytest.mark.parametrize("value", URLS)
def test_a_url_or_server_path_is_refused_on_the_video_inputs_too(app_url, value):
    r = httpx.post(app_url + "gradio_api/call/attention_video", json={"data": [value]})
    assert r.status_code == 422 and "not a file uploaded to this server" in r.json()["detail"][0]["message"]
    for fn, n in _video_tab_fns():  # every event of the Video tab that takes the video (run, estimate)
        body = {"data": [value] + [None] * (n - 1), "fn_index": fn, "session_hash": "videotab1"}
        r = httpx.post(app_url + "gradio_api/queue/join", json=body)
        assert r.status_code == 422 and "not a file uploaded to this server" in r.json()["detail"][0]["message"]


def test_a_huge_value_comes_back_cut_in_the_answer_and_the_log(client, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="attention")
    with pytest.raises(Exception) as e:
        client.predict(handle_file(DIGIT), "x" * 900_000, api_name="/relevance")
    assert len(str(e.value)) < 3000 and "more characters cut" in str(e.value)
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert lines and max(len(m) for m in lines) < 3000 and "more characters cut" in lines[-1]


def test_a_call_with_too_few_values_is_refused_without_echoing_them(app_url):
    r = httpx.post(app_url + "gradio_api/call/relevance", json={"data": [None, "x" * 900_000]})
    assert r.status_code == 422 and len(r.content) < 2000 and "takes 4" in r.json()["detail"][0]["message"]


def test_a_mixed_flood_from_many_sessions_of_one_client_leaves_another_visitor_served(visitor_client, tmp_path):
    sessions = [visitor_client(11) for _ in range(6)]
    kinds = [
        ((handle_file(DIGIT), "mnist_vit"), {"api_name": "/attention_maps"}),
        ((handle_file(_noise(tmp_path, 700, 128)), "mnist_vit", "", "128"), {"api_name": "/relevance"}),
        ((handle_file(DIGITS_CLIP), "mnist_vit"), {"fps": 10, "api_name": "/attention_video"}),
    ]
    jobs = [sessions[i % 6].submit(*kinds[i % 3][0], **kinds[i % 3][1]) for i in range(18)]
    t0 = time.monotonic()
    _, _, info = visitor_client(12).predict(handle_file(_noise(tmp_path, 701)), api_name="/relevance")
    honest = time.monotonic() - t0
    outcomes = []
    for j in jobs:
        try:
            j.result(timeout=300)
            outcomes.append("done")
        except Exception as e:  # noqa: BLE001 - refusals are outcomes here
            outcomes.append("refused" if "Not queued" in str(e) else f"{type(e).__name__}: {str(e)[:80]}")
    assert set(outcomes) <= {"done", "refused"}, outcomes
    assert outcomes.count("done") <= 1 + 1 + SETTINGS.visitor_queued + 6, outcomes  # forwards: 1 at a time
    assert info["target"]["index"] >= 0 and honest < 120


def test_an_honest_visitors_heavy_job_starts_beside_a_flooders_running_one():
    """Two heavy slots (ATTENTION_HEAVY_SLOTS, 2 by default) and one running job per visitor: a flooding
    visitor holds one slot, and another visitor's job starts at once in the other instead of waiting for
    the flooder's to end; the flooder's own second job waits."""
    import threading

    from attention.serving.admission import HEAVY
    from attention.serving.visitors import Visitor

    assert HEAVY.slots == SETTINGS.heavy_slots == 2
    flooder, honest = Visitor("flood", "10.66.0.9"), Visitor("honest", "10.0.0.9")
    honest_ran, second_ran = threading.Event(), threading.Event()

    def job(visitor: Visitor, ran: threading.Event) -> None:
        with HEAVY.turn(visitor):
            ran.set()

    with HEAVY.turn(flooder):
        threads = [threading.Thread(target=job, args=a) for a in ((flooder, second_ran), (honest, honest_ran))]
        for t in threads:
            t.start()
        assert honest_ran.wait(10), "the honest visitor's job waited for the flooder's"
        assert not second_ran.wait(0.3), "a visitor's second job ran beside its first"
    assert second_ran.wait(10)
    for t in threads:
        t.join(10)
