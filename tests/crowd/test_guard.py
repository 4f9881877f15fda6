"""Spec of attention.crowd.guard: what a request may cost before the app sees it. The guard is driven here
in front of a bare ASGI app that records what reaches it (no Gradio), with a clock the tests move."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from starlette.testclient import TestClient

from attention.crowd.guard import Guard
from attention.crowd.limits import Buckets, FolderBudget, GuardLimits, Recent, Routes, session_id_ok


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """An ASGI app answering 200 with the body it read: what the guard let through."""

    def __init__(self):
        self.calls = []

    async def __call__(self, scope, receive, send):
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if m["type"] == "http.disconnect" or not m.get("more_body"):
                break
        self.calls.append((scope["path"], body))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})


def guarded(clock=None, check_json=None, upload_folder=None, **limits):
    limits.setdefault("refusal_delay", 0.0)
    app = Recorder()
    guard = Guard(
        app,
        GuardLimits(**limits),
        Routes(),
        upload_folder=upload_folder,
        check_json=check_json,
        clock=clock or Clock(),
    )
    return guard, app, TestClient(guard, client=("10.0.0.1", 5000))


def other_client(guard) -> TestClient:
    return TestClient(guard, client=("10.0.0.2", 5000))


LIVE, JOIN = "/gradio_api/component_server", "/gradio_api/queue/join"


def live_body(session: str = "s1") -> dict:
    return {"data": ["tok", None, 0], "component_id": 1, "fn_name": "live_maps", "session_hash": session}


def join_body(session: str) -> dict:
    return {"data": [], "fn_index": 0, "session_hash": session}


# ----- session ids ---------------------------------------------------------------------------
@pytest.mark.parametrize("good", ["k3j2h1g0f9", "0b5f5a5e-2c1d-4a47-9a8c-0e5e4cc6a3a1", "a", "x" * 64])
def test_the_session_ids_of_gradios_page_and_client_are_accepted(good):
    assert session_id_ok(good)


@pytest.mark.parametrize("bad", ["", "x" * 65, "x" * 1_000_000, "a b", "<img>", "é", "../x", 5, None, ["a"]])
def test_other_session_ids_are_not(bad):
    assert not session_id_ok(bad)


def test_a_1_mb_session_id_is_refused_before_the_app_reads_it():
    _, app, http = guarded(body_bytes=4 << 20)
    r = http.post(JOIN, json=join_body("x" * 1_000_000))
    assert r.status_code == 400 and "1,000,000 characters" in r.json()["detail"] and "1-64" in r.json()["detail"]
    r = http.get("/gradio_api/queue/data", params={"session_hash": "<script>"})
    assert r.status_code == 400 and "<script>" not in r.text  # the id is not echoed
    assert http.get("/gradio_api/heartbeat/" + "y" * 200).status_code == 400
    assert app.calls == []


# ----- bodies --------------------------------------------------------------------------------
def test_a_body_over_its_routes_limit_is_refused_from_its_content_length():
    _, app, http = guarded(body_bytes=1000, live_body_bytes=100, upload_body_bytes=5000)
    assert http.post(LIVE, content=b"x" * 101, headers={"content-type": "application/json"}).status_code == 413
    r = http.post(JOIN, content=b"x" * 1001)
    assert r.status_code == 413 and "1,000" in r.json()["detail"]
    assert http.post("/gradio_api/upload", files={"files": ("a.png", b"x" * 6000)}).status_code == 413
    assert app.calls == []


def test_a_body_without_a_length_is_cut_off_at_the_limit():
    _, app, http = guarded(body_bytes=1000)

    def chunks():
        for _ in range(50):
            yield b"x" * 100

    r = http.post(JOIN, content=chunks())  # chunked: no Content-Length
    assert r.status_code == 413 and app.calls == []


def test_a_body_within_its_limit_reaches_the_app_unchanged():
    _, app, http = guarded()
    body = join_body("abc")
    assert http.post(JOIN, json=body).status_code == 200
    assert json.loads(app.calls[0][1]) == body


# ----- new sessions and the live route -------------------------------------------------------
def test_new_sessions_of_a_client_are_rate_limited_and_known_ones_are_not():
    clock = Clock()
    guard, app, http = guarded(clock, new_sessions_per_s=1.0, new_session_burst=3)
    assert [http.post(JOIN, json=join_body(f"s{i}")).status_code for i in range(5)] == [200, 200, 200, 429, 429]
    r = http.post(JOIN, json=join_body("s9"))
    assert r.status_code == 429 and r.headers["retry-after"] == "1" and "new sessions" in r.json()["detail"]
    assert all(http.post(JOIN, json=join_body("s1")).status_code == 200 for _ in range(20))  # a known one
    assert other_client(guard).post(JOIN, json=join_body("t1")).status_code == 200  # another client
    clock.now += 2.0
    assert [http.post(JOIN, json=join_body(f"u{i}")).status_code for i in range(3)] == [200, 200, 429]
    assert guard.refused[429] == 4


def test_a_burst_of_new_sessions_is_paced_and_another_client_is_not_held():
    """Within its rate, a client's 8 new sessions at once start `new_session_pace` a second (4 at once, then one
    every 0.25 s: the event loop builds Gradio's state of each), while another client's comes at once."""
    guard, app, _ = guarded(time.monotonic, new_sessions_per_s=100.0, new_session_burst=100, new_session_pace=4.0)

    async def join(client: str, session: str) -> float:
        body = json.dumps(join_body(session)).encode()
        scope = {"type": "http", "method": "POST", "path": JOIN, "query_string": b"", "client": (client, 1)}
        scope["headers"] = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]

        async def receive():
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message):
            pass

        t = time.monotonic()
        await guard(scope, receive, send)
        return time.monotonic() - t

    async def burst():
        many = [join("10.0.0.1", f"s{i}") for i in range(8)]
        return await asyncio.gather(*many, join("10.0.0.2", "t"))

    times = asyncio.run(burst())
    assert len(app.calls) == 9 and times[-1] < 0.2, times  # the other client at once
    assert sorted(times[:8])[3] < 0.2 and 0.9 <= max(times[:8]) < 2.0, times  # 4 at once, the 8th 1 s later


async def _request(guard, client: str, path: str, session: str, method: str = "POST") -> tuple[float, int, dict]:
    """One request through `guard` from `client`: (seconds it was held, status, headers)."""
    body = json.dumps(join_body(session)).encode() if method == "POST" else b""
    scope = {"type": "http", "method": method, "path": path, "query_string": b"", "client": (client, 1)}
    scope["headers"] = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    answer: dict = {}

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            answer.update(status=message["status"], headers=dict(message["headers"]))

    t = time.monotonic()
    await guard(scope, receive, send)
    return time.monotonic() - t, answer["status"], answer["headers"]


def test_new_sessions_past_the_rate_wait_for_their_turn_and_only_past_the_wait_are_refused():
    """A class's burst from one address: 2 at once (the burst), the next each held until its token comes (10 a
    second), not refused; one that would wait over `new_session_wait` (1 s) is refused, saying the address is
    counted and when to retry (Retry-After)."""
    guard, app, _ = guarded(
        time.monotonic, new_sessions_per_s=10.0, new_session_burst=2, new_session_wait=1.0, new_session_pace=0
    )

    async def burst():
        return await asyncio.gather(*(_request(guard, "10.0.0.1", JOIN, f"s{i}") for i in range(14)))

    answers = asyncio.run(burst())
    held = sorted(t for t, status, _ in answers if status == 200)
    refused = [(status, headers) for _, status, headers in answers if status != 200]
    assert len(held) == 12 and held[1] < 0.2 and 0.9 <= held[-1] < 1.5, held  # 2 at once, then 10 a second
    assert len(refused) == 2 and all(s == 429 and int(h[b"retry-after"]) >= 1 for s, h in refused), refused
    assert len(app.calls) == 12


def test_pacing_holds_a_request_at_most_new_session_hold():
    """30 new sessions at once within the rate, paced 4 a second: none held past `new_session_hold` (1 s here;
    4 s by default, under gradio_client's 5 s wait for a queue join), so a class's joins do not time out."""
    guard, app, _ = guarded(
        time.monotonic, new_sessions_per_s=100.0, new_session_burst=100, new_session_pace=4.0, new_session_hold=1.0
    )

    async def burst():
        return await asyncio.gather(*(_request(guard, "10.0.0.1", JOIN, f"s{i}") for i in range(30)))

    held = sorted(t for t, status, _ in asyncio.run(burst()) if status == 200)
    assert len(held) == 30 and 0.9 <= held[-1] < 1.5, held


def test_a_held_new_session_is_counted_once_and_its_next_request_waits_with_it():
    """gradio_client opens its heartbeat (a GET naming its session) before its first join: the join of a session
    held for its token waits until the same moment and takes no second token."""
    guard, app, _ = guarded(
        time.monotonic, new_sessions_per_s=2.0, new_session_burst=1, new_session_wait=5.0, new_session_pace=0
    )

    async def both():
        first = await _request(guard, "10.0.0.1", JOIN, "s0")  # the burst's one token
        heartbeat = asyncio.ensure_future(_request(guard, "10.0.0.1", "/gradio_api/heartbeat/s1", "s1", "GET"))
        await asyncio.sleep(0.1)
        join = await _request(guard, "10.0.0.1", JOIN, "s1")
        return first, await heartbeat, join

    first, heartbeat, join = asyncio.run(both())
    assert first[1] == heartbeat[1] == join[1] == 200
    assert 0.4 <= heartbeat[0] < 0.7 and join[0] < 0.5, (heartbeat, join)  # 0.5 s for s1's token, once
    assert guard.new_sessions.pace("10.0.0.1", 1, 0.0)[1] is False  # no token left over: s1 took one only


def test_an_apps_refusal_that_says_when_to_retry_carries_retry_after():
    class Refusing:
        async def __call__(self, scope, receive, send):
            body = b'{"detail": "Not queued: ... Try again in about 7 s, when one has finished."}'
            await send({"type": "http.response.start", "status": 422, "headers": []})
            await send({"type": "http.response.body", "body": body})

    r = TestClient(Guard(Refusing(), GuardLimits(refusal_delay=0))).post(JOIN, json=join_body("s1"))
    assert r.status_code == 422 and r.headers["retry-after"] == "7"


def test_a_call_without_a_session_counts_as_a_new_one():
    guard, _, http = guarded(new_sessions_per_s=0.001, new_session_burst=2)
    codes = [http.post("/gradio_api/call/calculate", json={"data": ["1", "1", "1"]}).status_code for _ in range(3)]
    assert codes == [200, 200, 429]


def test_the_live_route_answers_only_a_session_seen_elsewhere_first():
    _, app, http = guarded()
    r = http.post(LIVE, json=live_body("fresh"))
    assert r.status_code == 403 and app.calls == []
    http.post(JOIN, json=join_body("fresh"))
    assert http.post(LIVE, json=live_body("fresh")).status_code == 200


def test_live_calls_of_a_client_are_rate_limited():
    clock = Clock()
    guard, _, http = guarded(clock, live_per_s=5.0)
    http.post(JOIN, json=join_body("s1"))
    codes = [http.post(LIVE, json=live_body()).status_code for _ in range(12)]
    assert codes == [200] * 10 + [429] * 2  # a burst of twice the rate
    other = other_client(guard)
    assert other.post(LIVE, json=live_body()).status_code == 200
    clock.now += 1.0
    assert [http.post(LIVE, json=live_body()).status_code for _ in range(6)] == [200] * 5 + [429]


def test_the_live_route_takes_json_only():
    _, _, http = guarded()
    http.post(JOIN, json=join_body("s1"))
    r = http.post(LIVE, data={"session_hash": "s1", "fn_name": "live_maps", "component_id": "1"})
    assert r.status_code == 415


# ----- uploads -------------------------------------------------------------------------------
def test_upload_bytes_of_a_client_are_rate_limited(tmp_path):
    clock = Clock()
    guard, _, http = guarded(clock, upload_bytes_per_s=1000, upload_burst_bytes=10_000, upload_folder=tmp_path)
    codes = [http.post("/gradio_api/upload", files={"files": ("a.png", b"x" * 3000)}).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    assert other_client(guard).post("/gradio_api/upload", files={"files": ("a.png", b"x" * 3000)}).status_code == 200
    clock.now += 4
    assert http.post("/gradio_api/upload", files={"files": ("a.png", b"x" * 3000)}).status_code == 200


def test_uploads_stop_when_the_upload_folder_is_full(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "big.bin").write_bytes(b"x" * 9000)
    _, _, http = guarded(upload_folder=tmp_path, upload_folder_bytes=10_000)
    r = http.post("/gradio_api/upload", files={"files": ("a.png", b"x" * 3000)})
    assert r.status_code == 507 and "full" in r.json()["detail"]


def test_the_folder_budget_counts_what_it_admitted_between_measures(tmp_path):
    clock = Clock()
    budget = FolderBudget(tmp_path, 1000, every=10, clock=clock)
    assert asyncio.run(budget.admit(600)) and not asyncio.run(budget.admit(600))
    clock.now += 11  # re-measured: the 600 were never written
    assert asyncio.run(budget.admit(600))


# ----- the app's own validation, and the tables' bounds --------------------------------------
def test_a_json_check_answers_422_with_its_detail():
    detail = [{"__type__": "validate", "is_valid": False, "parameter_name": "image", "message": "not a file"}]
    _, app, http = guarded(
        check_json=lambda path, body: ("not a file", detail) if body.get("data") == ["/etc"] else None
    )
    r = http.post("/gradio_api/call/attention_maps", json={"data": ["/etc"]})
    assert r.status_code == 422 and r.json()["detail"] == detail and app.calls == []
    assert http.post("/gradio_api/call/attention_maps", json={"data": []}).status_code == 200


def test_buckets_and_seen_sessions_are_bounded():
    clock = Clock()
    b = Buckets(rate=1.0, burst=2.0, max_keys=3, clock=clock)
    for k in "abcdef":
        assert b.take(k) == 0.0
    assert len(b) == 3
    assert b.take("f") == 0.0 and b.take("f") == pytest.approx(1.0)  # wait one second for a token
    assert b.take("g", 3.0) == float("inf")  # more than a burst is never given
    r = Recent(2)
    for k in "abc":
        r.add(k)
    assert "a" not in r and "b" in r and "c" in r and len(r) == 2


def test_a_refusal_of_a_flood_is_held_and_a_validation_answer_is_not():
    import time

    bad = ("no", [{"__type__": "validate", "is_valid": False, "parameter_name": "image", "message": "no"}])
    # the held refusal waits the whole delay; the validation answer none of it (1 s of margin for a busy machine)
    _, _, http = guarded(refusal_delay=1.2, check_json=lambda path, body: bad if body.get("data") == ["x"] else None)
    t = time.perf_counter()
    assert http.post(JOIN, json=join_body("x" * 100)).status_code == 400
    assert time.perf_counter() - t >= 1.2
    t = time.perf_counter()
    assert http.post("/gradio_api/call/attention_maps", json={"data": ["x"]}).status_code == 422
    assert time.perf_counter() - t < 1.2
