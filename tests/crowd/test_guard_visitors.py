"""Spec of attention.crowd.guard's view of who sends a request (issue 32): the client address from trusted proxy
hops only; an MCP caller signed into the header Gradio's MCP server copies into its loopback call, so the
call is charged to that caller and each MCP client is a visitor of its own (attention.ui.common.admit); an MCP
body's bytes charged as upload bytes of its caller; a client that goes away is one log line."""

from __future__ import annotations

import asyncio
import logging

import pytest
from starlette.testclient import TestClient

from attention.crowd.admission import Lane
from attention.crowd.clients import VISITOR_HEADER, Proxies, sign
from attention.crowd.guard import Guard
from attention.crowd.limits import GuardLimits, Routes
from attention.crowd.visitors import Visitor
from attention.ui.common.admit import heavy_share, mcp_caller, visitor_of
from tests.crowd.test_guard import Clock

MCP = "/gradio_api/mcp/"


class Seen:
    """An ASGI app recording the client and the visitor header each request reached it with."""

    def __init__(self, fail: Exception | None = None):
        self.seen, self.fail = [], fail

    async def __call__(self, scope, receive, send):
        while (await receive()).get("more_body"):
            pass
        if self.fail is not None:
            raise self.fail
        h = dict(scope["headers"])
        self.seen.append((scope["client"][0], h.get(VISITOR_HEADER.encode(), b"").decode()))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def guard_at(peer: str, proxies: Proxies | None = None, app=None, clock=None, **limits):
    app = app or Seen()
    limits.setdefault("refusal_delay", 0.0)
    g = Guard(app, GuardLimits(**limits), Routes(), clock=clock or Clock(), proxies=proxies)
    return g, app, TestClient(g, client=(peer, 5000))


def test_each_mcp_caller_is_signed_and_its_loopback_call_is_theirs():
    g, app, outside = guard_at("203.0.113.7")
    outside.post(MCP, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers={"mcp-session-id": "abc"})
    client, signed = app.seen[-1]
    assert client == "203.0.113.7" and signed.startswith("203.0.113.7 abc ")
    loop = TestClient(g, client=("127.0.0.1", 40000))  # Gradio's own client, copying the MCP request's headers
    loop.post(
        "/gradio_api/queue/join",
        json={"data": [], "fn_index": 0, "session_hash": "shared"},
        headers={VISITOR_HEADER: signed},
    )
    assert app.seen[-1] == ("203.0.113.7", signed)

    class Req:  # what gr.Request shows the validator
        headers = {VISITOR_HEADER: signed}
        session_hash = "shared"
        client = type("C", (), {"host": "203.0.113.7"})()

    v = visitor_of(Req())
    assert v.session == "mcp-abc" and v.client == "203.0.113.7"  # not the shared session of every MCP client


def test_behind_a_trusted_proxy_the_loopback_call_is_still_the_mcp_callers():
    """Gradio's loopback call copies the MCP request's X-Forwarded-For too: the signed caller wins."""
    g, app, outside = guard_at("127.0.0.1", Proxies.parse("127.0.0.1"))
    mcp_headers = {"mcp-session-id": "abc", "x-forwarded-for": "10.55.0.1"}
    outside.post(MCP, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=mcp_headers)
    signed = app.seen[-1][1]
    outside.post(
        "/gradio_api/queue/join",
        json={"data": [], "fn_index": 0, "session_hash": "shared"},
        headers={VISITOR_HEADER: signed, "x-forwarded-for": "10.55.0.1"},
    )
    assert app.seen[-1] == ("10.55.0.1", signed)


def test_a_forged_or_foreign_visitor_header_is_dropped():
    g, app, outside = guard_at("198.51.100.1")
    outside.post(
        "/gradio_api/queue/join",
        json={"data": [], "fn_index": 0, "session_hash": "s1"},
        headers={VISITOR_HEADER: "1.2.3.4 x deadbeef"},
    )
    assert app.seen[-1] == ("198.51.100.1", "")
    signed = sign("1.2.3.4", "x")
    outside.post(
        "/gradio_api/queue/join",
        json={"data": [], "fn_index": 0, "session_hash": "s1"},
        headers={VISITOR_HEADER: signed},
    )
    assert app.seen[-1] == ("198.51.100.1", "")  # signed, but not from this process's loopback call


@pytest.mark.parametrize("forged", ["1.2.3.4 victim", "1.2.3.4 victim 0123456789abcdef0123456789abcdef"])
def test_without_the_guard_a_visitor_written_header_makes_no_one_else(forged):
    """ATTENTION_GUARD=0: nothing strips the header, so the app checks the signature itself; a visitor who
    writes one (as the guard's old unsigned form, or with a made-up signature) stays who they are, and new
    headers per call do not escape their share of a lane."""

    class Req:
        def __init__(self, value):
            self.headers = {VISITOR_HEADER: value}
            self.session_hash = "s1"
            self.client = type("C", (), {"host": "198.51.100.1"})()

    assert mcp_caller(Req(forged)) is None
    assert visitor_of(Req(forged)) == Visitor("s1", "198.51.100.1")
    lane = Lane("test", slots=1, queued=0)
    share = heavy_share(lane)
    assert asyncio.run(share(Req(forged + "1"), None, None))[0]["is_valid"] is True
    refused = asyncio.run(share(Req(forged + "2"), None, None))[0]  # another forged caller: the same visitor
    assert refused["is_valid"] is False and "Not queued" in refused["message"]


def test_forwarded_for_counts_only_through_trusted_hops():
    _, app, http = guard_at("127.0.0.1")
    http.get("/x", headers={"X-Forwarded-For": "9.9.9.9"})
    assert app.seen[-1][0] == "127.0.0.1"  # no proxy trusted: the peer
    _, app, http = guard_at("127.0.0.1", Proxies.parse("127.0.0.1"))
    http.get("/x", headers={"X-Forwarded-For": "6.6.6.6, 9.9.9.9"})
    assert app.seen[-1][0] == "9.9.9.9"  # the proxy's entry, not the visitor's own to its left
    _, app, http = guard_at("10.0.0.5", Proxies.parse("", hops=1))
    http.get("/x", headers={"X-Forwarded-For": "6.6.6.6, 9.9.9.9"})
    assert app.seen[-1][0] == "9.9.9.9"


def test_mcp_bodies_are_charged_as_upload_bytes_of_their_caller(tmp_path):
    """60 MCP calls each carrying a 1 MB data: file: past the burst (5 MB here) and the rate, refused; bytes
    admitted stay within burst + rate x time, whatever the count."""
    clock = Clock()
    g, app, http = guard_at("203.0.113.9", clock=clock, upload_bytes_per_s=100_000, upload_burst_bytes=5_000_000)
    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"image":"data:image/png;base64,'
        + b"A" * 1_000_000
        + b'"}}}'
    )
    codes = []
    for _ in range(60):
        codes.append(http.post(MCP, content=body, headers={"content-type": "application/json"}).status_code)
        clock.now += 0.1
    admitted = codes.count(200) * len(body)
    assert admitted <= 5_000_000 + 100_000 * 6.0 + len(body) and codes.count(429) >= 50, codes
    other = TestClient(g, client=("203.0.113.10", 5000))  # another MCP client is not held back
    assert other.post(MCP, content=body, headers={"content-type": "application/json"}).status_code == 200


def test_a_client_that_goes_away_is_one_log_line(caplog):
    class ClientDisconnect(Exception):  # starlette.requests.ClientDisconnect, by name
        pass

    _, _, http = guard_at("10.0.0.1", app=Seen(fail=ClientDisconnect()))
    caplog.set_level(logging.INFO, logger="attention.crowd.guard")
    http.post("/gradio_api/upload", content=b"x" * 10, headers={"content-type": "application/octet-stream"})
    lines = [r for r in caplog.records if "went away" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None and "\n" not in lines[0].getMessage()


def test_an_error_answer_of_the_app_is_cut():
    class Echo:
        async def __call__(self, scope, receive, send):
            body = b""
            while True:
                m = await receive()
                body += m.get("body", b"")
                if not m.get("more_body"):
                    break
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})

    _, _, http = guard_at("10.0.0.1", app=Echo(), body_bytes=2 << 20)
    r = http.post("/gradio_api/run/x", content=b"y" * 900_000, headers={"content-type": "text/plain"})
    assert r.status_code == 400 and len(r.content) < 5000 and r.content.endswith(b"(the rest of this answer was cut)")
