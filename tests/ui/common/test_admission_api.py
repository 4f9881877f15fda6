"""Spec of the admission of computing endpoints on the launched app (issues 32 and 48): jobs of one address wait
their turns, served round-robin between addresses and then between an address's sessions (a class behind one
address is served, every student), refused only beyond stated rooms (a session's ATTENTION_VISITOR_JOBS, an
address's ATTENTION_ADDRESS_WAITING) with what is counted and when to retry; jobs priced before they start;
results of a visitor's own picture not shared; file values that name a URL or a server path refused on every
file input; MCP callers as visitors of their own; messages cut."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError, ValidationError
from PIL import Image

import app
from attention.config import SETTINGS
from attention.ui.video.tab import DIGITS_CLIP
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
def test_one_address_from_many_sessions_waits_its_turns_and_another_address_is_served(
    visitor_client, tmp_path, endpoint
):
    """12 jobs at once from one client address over 4 sessions (threads and clients at once): every one served,
    none refused (they wait their turns); another visitor meanwhile is served."""
    sessions = [visitor_client(7) for _ in range(4)]  # one client address
    if endpoint == "/relevance":
        jobs = [
            sessions[i % 4].submit(handle_file(_noise(tmp_path, i, 96)), "mnist_vit", "", "64", api_name=endpoint)
            for i in range(12)
        ]
    else:
        jobs = [sessions[i % 4].submit(handle_file(DIGITS_CLIP), "mnist_vit", api_name=endpoint) for i in range(12)]
    other = visitor_client(8).predict(handle_file(DIGIT), "mnist_vit", api_name="/relevance")
    assert other[2]["target"]["index"] == 3
    assert _outcomes(jobs) == ["done"] * 12


def test_one_session_has_a_stated_room_the_rest_refused_naming_the_session(visitor_client, tmp_path):
    from attention.crowd.admission import HEAVY
    from attention.crowd.visitors import Visitor

    c = visitor_client(9)
    n = SETTINGS.visitor_jobs + 2
    # every heavy slot held by someone else while the jobs are sent: none can finish before the last arrives
    # (else a fast first job makes room for a later one and the count depends on the machine's speed)
    with contextlib.ExitStack() as held:
        for i in range(HEAVY.slots):
            held.enter_context(HEAVY.turn(Visitor(f"holder{i}", f"10.9.9.{i}")))
        jobs = [c.submit(handle_file(DIGITS_CLIP), "mnist_vit", api_name="/attention_video") for _ in range(2)]
        jobs += [c.submit(handle_file(_noise(tmp_path, 50 + i)), api_name="/relevance") for i in range(n - 2)]
        deadline = time.monotonic() + 60
        while sum(j.done() for j in jobs) < 2 and time.monotonic() < deadline:  # the refusals come first
            time.sleep(0.05)
        refusals = [str(j.exception()) for j in jobs if j.done()]
    outcomes = _outcomes(jobs)
    assert outcomes.count("done") == SETTINGS.visitor_jobs and outcomes.count("refused") == 2, outcomes
    assert all("this session has 6 requests waiting or running" in r for r in refusals), refusals


def test_a_high_token_relevance_is_refused_before_it_runs_naming_what_fits(client):
    t0 = time.monotonic()
    with pytest.raises(Exception, match=r"GFLOP per relevance job.*The largest resolution accepted") as e:
        client.predict(handle_file(DIGIT), "mnist_vit", "", "512", api_name="/relevance")
    assert time.monotonic() - t0 < 20, "priced before it ran"
    assert "16,384 patch tokens" in str(e.value)


def test_a_visitors_own_picture_gets_a_relevance_of_their_own(tmp_path):
    from attention.crowd.visitors import Visitor
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
    jobs = [sessions[i % 6].submit(*kinds[i % 3][0], **kinds[i % 3][1]) for i in range(12)]
    t0 = time.monotonic()
    _, _, info = visitor_client(12).predict(handle_file(_noise(tmp_path, 701)), api_name="/relevance")
    honest = time.monotonic() - t0
    assert _outcomes(jobs) == ["done"] * 12  # within every room: they wait their turns
    assert info["target"]["index"] >= 0 and honest < 120


def test_an_honest_visitors_heavy_job_starts_beside_a_flooders_running_one():
    """Two heavy slots (ATTENTION_HEAVY_SLOTS, 2 by default) and one running job per visitor: a flooding
    visitor holds one slot, and another visitor's job starts at once in the other instead of waiting for
    the flooder's to end; the flooder's own second job waits."""
    import threading

    from attention.crowd.admission import HEAVY
    from attention.crowd.visitors import Visitor

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


def _maps_call(app_url: str, address: str, session: str, picture: str) -> tuple[float, str]:
    """One /attention_maps job of `session` from `address` over Gradio's queue API (upload, queue/join, the
    queue/data stream; what gradio_client does, without its start-up): (seconds when answered, outcome)."""
    fn = next(f for f in app.demo.fns.values() if f.api_name == "attention_maps")
    headers = {"X-Forwarded-For": address}
    with httpx.Client(base_url=app_url, headers=headers, timeout=httpx.Timeout(30, read=120)) as http:
        with open(picture, "rb") as f:
            path = http.post("gradio_api/upload", files=[("files", ("p.png", f, "image/png"))]).json()[0]
        data = [c.value for c in fn.inputs]
        data[:2] = [{"path": path, "meta": {"_type": "gradio.FileData"}}, "mnist_vit"]
        join = http.post("gradio_api/queue/join", json={"data": data, "fn_index": fn._id, "session_hash": session})
        if join.status_code != 200:
            return time.monotonic(), f"refused: {join.text[:200]}"
        with http.stream("GET", "gradio_api/queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                m = json.loads(line[5:]) if line.startswith("data:") else {}
                if m.get("msg") == "process_completed":
                    return time.monotonic(), "done" if m.get("success") else f"error: {str(m)[:200]}"
    return time.monotonic(), "no answer"


@pytest.mark.slow
def test_a_class_behind_one_address_is_served_every_student_and_another_address_beside_it(app_url, tmp_path):
    """30 sessions on one address (a class behind its school's NAT) each ask one /attention_maps at once (their
    own pictures: each a forward): all 30 served, none refused, the last within 60 s; a visitor at another
    address asking just after them is served among the first (round-robin between addresses), not after the
    class (first come, first served)."""
    pictures = [_noise(tmp_path, 900 + i, 32) for i in range(31)]
    start = threading.Barrier(31)

    def student(i: int) -> tuple[float, str]:
        start.wait(30)
        if i == 30:
            time.sleep(0.3)  # the other address asks once the class's jobs are in
        address = "10.48.0.2" if i == 30 else "10.48.0.1"
        return _maps_call(app_url, address, f"class48s{i}", pictures[i])

    t0 = time.monotonic()
    with ThreadPoolExecutor(31) as pool:
        answers = list(pool.map(student, range(31)))
    outcomes = [o for _, o in answers]
    assert outcomes == ["done"] * 31, outcomes
    assert max(t for t, _ in answers[:30]) - t0 < 60
    rank = sorted(t for t, _ in answers).index(answers[30][0])
    assert rank < 10, f"the other address was answered {rank + 1}th of 31"


def test_one_sessions_back_to_back_rest_calls_are_never_refused_with_nothing_running(app_url):
    """12 REST calls of one session, each after the last one's answer (POST /call, then its result): none refused
    "waiting or running" (issue 49: Gradio's own count kept a REST job until its answer was read, about 1 s)."""
    fn = next(f for f in app.demo.fns.values() if f.api_name == "attention_maps")
    with httpx.Client(base_url=app_url, timeout=httpx.Timeout(30, read=120)) as http:
        with open(DIGIT, "rb") as f:
            path = http.post("gradio_api/upload", files=[("files", ("d.png", f, "image/png"))]).json()[0]
        data = [c.value for c in fn.inputs]
        data[:2] = [{"path": path, "meta": {"_type": "gradio.FileData"}}, "mnist_vit"]
        for i in range(12):
            r = http.post("gradio_api/call/attention_maps", json={"data": data, "session_hash": "rest49"})
            assert r.status_code == 200, (i, r.text[:300])
            answer = http.get(f"gradio_api/call/attention_maps/{r.json()['event_id']}").text
            assert "event: complete" in answer, (i, answer[:300])
