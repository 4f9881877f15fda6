"""Cheap refusals in front of the web app: what a request may cost the server before it is validated.

A plain ASGI middleware (no web framework imported) that answers, before the app builds anything:
- 413 for a body over its route's limit (the Content-Length, and the bytes actually received);
- 400 for a session id that is not 1-64 characters of [A-Za-z0-9_-] (query string or JSON body);
- 429 for a client over its rate of live-route calls or of upload bytes, or of new sessions beyond what it
  may wait for: a burst of a client's new sessions is paced, not refused (`new_session_pace` a second, and
  past its rate each held until its token comes, up to `new_session_wait` seconds; a session held once is
  not counted again by its next requests, which wait with it);
- 403 for a live-route call from a session this server has not seen on another route (a browser's
  first call there always follows an answer of the queue, which carried the token it asks about);
- 507 for an upload that would take the upload folder over its total.
Refusals of the kinds a flood sends (400, 403, 413, 429) are held `refusal_delay` seconds before they are
sent (an asyncio sleep: nearly free here), so one connection of a flooding client gets one answer a
second instead of hundreds.

A client is the peer address, or behind proxies the operator trusts the address they forwarded
(`attention.crowd.clients.Proxies`: ATTENTION_TRUSTED_PROXIES / ATTENTION_PROXY_HOPS; never a visitor's own
X-Forwarded-For); the guard puts it in `scope["client"]` for the app. An MCP call's caller is signed
into its `VISITOR_HEADER`, which Gradio's MCP server copies into its loopback call of the queue, so
that call is charged to the caller (and each MCP client is a visitor of its own: `attention.ui.common.admit`,
which checks the signature again, so a visitor's own header means nothing even without this guard);
an MCP body's bytes count as upload bytes of its caller (its `data:` files are written to the upload
folder). Every table is bounded: clients and sessions are kept least recently used first out, at most
`max_clients` and `max_sessions`. A client that goes away mid-request (ClientDisconnect) is one log line.

    app = Guard(app, GuardLimits(...), Routes(...))   # limits and tables: attention.crowd.limits
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs

from attention.crowd.asgi import Refusal, answer, content_length, counting, loads, read_body, replay
from attention.crowd.clients import VISITOR_HEADER, Proxies, sign, verify
from attention.crowd.limits import Buckets, FolderBudget, GuardLimits, Recent, Routes, session_id_ok

__all__ = ["Guard", "Refusal"]
log = logging.getLogger(__name__)
LOOPBACK = {"127.0.0.1", "::1"}
MAX_ERROR_BYTES = 4096  # an error answer's body from the app beyond this is cut (it may quote what a visitor sent)
HELD = {400, 403, 413, 429}  # refusals of what a flood sends: each costs its sender a second, the server ~nothing
RETRY_HINT = re.compile(rb"Try again in about ([0-9,]+) s")  # the app's refusals say when; sent as Retry-After too


class Guard:
    """The ASGI middleware (see the module's doc)."""

    def __init__(
        self,
        app,
        limits: GuardLimits | None = None,
        routes: Routes | None = None,
        upload_folder: Path | None = None,
        check_json: Callable[[str, dict], tuple[str, object] | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        proxies: Proxies | None = None,
    ):
        self.app, self.limits, self.routes = app, limits or GuardLimits(), routes or Routes()
        lim = self.limits
        self.new_sessions = Buckets(lim.new_sessions_per_s, lim.new_session_burst, lim.max_clients, clock)
        pace = lim.new_session_pace
        self.session_pace = Buckets(pace, max(1.0, pace), lim.max_clients, clock) if pace > 0 else None
        self.live_calls = Buckets(lim.live_per_s, 2 * lim.live_per_s, lim.max_clients, clock)
        self.uploads = Buckets(lim.upload_bytes_per_s, lim.upload_burst_bytes, lim.max_clients, clock)
        self.seen = Recent(lim.max_sessions)
        self.pacing: OrderedDict[str, float] = OrderedDict()  # new session held -> when it may pass (clock)
        self._clock = clock
        self.folder = FolderBudget(upload_folder, lim.upload_folder_bytes, clock=clock)
        self.refused: dict[int, int] = {}  # status -> how many (for benches and tests)
        self.check_json = check_json  # (path, JSON body) -> None, or (message, detail) answered with 422
        self.proxies = proxies or Proxies()

    def _who(self, scope) -> dict:
        """`scope` with the client address resolved (`proxies`); a VISITOR_HEADER kept only on a loopback
        call (Gradio's MCP server calling its own queue) that this process signed, and its caller then the
        client (whatever X-Forwarded-For that call copied); an MCP call's caller signed into one."""
        raw, name = scope.get("headers") or [], VISITOR_HEADER.encode()
        headers = [(k, v) for k, v in raw if k != name]
        peer = (scope.get("client") or ("?", 0))[0]
        client = self.proxies.client(peer, dict(headers).get(b"x-forwarded-for"))
        signed = next((v for k, v in raw if k == name), None)
        caller = verify(signed.decode("latin-1")) if signed is not None and peer in LOOPBACK else None
        if caller is not None:  # kept signed: the app checks it again (attention.ui.common.admit.mcp_caller)
            client = caller[0]
            headers.append((name, signed))
        elif scope["path"].startswith(self.routes.mcp):
            session = dict(headers).get(b"mcp-session-id", b"").decode("latin-1")[:64]
            headers.append((name, sign(client, session).encode("latin-1")))
        return {**scope, "client": (client, 0), "headers": headers}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        scope = self._who(scope)
        try:
            receive = await self._check(scope, receive)
        except Refusal as r:
            self.refused[r.status] = self.refused.get(r.status, 0) + 1
            if r.status in HELD and self.limits.refusal_delay > 0:
                await asyncio.sleep(self.limits.refusal_delay)  # a flooding client's connections wait (a tarpit)
            return await answer(send, r)
        started, held = False, None

        async def sending(message):
            """The app's answer, an error's body cut to MAX_ERROR_BYTES (Gradio's errors may quote what was sent)."""
            nonlocal started, held
            started = True
            if message["type"] == "http.response.start" and message.get("status", 200) >= 400:
                held = [message, b""]
                return
            if held is None or message["type"] != "http.response.body":
                return await send(message)
            held[1] += message.get("body", b"")
            if len(held[1]) > 4 * MAX_ERROR_BYTES:
                held[1] = held[1][: 4 * MAX_ERROR_BYTES]  # bounded while it comes
            if message.get("more_body"):
                return
            body = held[1]
            if len(body) > MAX_ERROR_BYTES:
                body = body[:MAX_ERROR_BYTES] + b"... (the rest of this answer was cut)"
            headers = [(k, v) for k, v in held[0].get("headers", []) if k.lower() != b"content-length"]
            if (hint := RETRY_HINT.search(body)) and not any(k.lower() == b"retry-after" for k, _ in headers):
                headers.append((b"retry-after", hint.group(1).replace(b",", b"")))  # a queue refusal's wait
            await send({**held[0], "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        try:
            await self.app(scope, receive, sending)
        except Exception as e:
            if type(e).__name__ != "ClientDisconnect":  # starlette's: the client went away mid-body
                raise
            where = f"{scope['method']} {scope['path'][:80]}"
            log.info("client %s went away during %s (ClientDisconnect)", scope["client"][0], where)
            if not started:  # (nobody reads it)
                await answer(send, Refusal(400, "The client went away before sending the whole body."))

    # ----- the checks ----------------------------------------------------------------------------
    async def _check(self, scope, receive):
        """Raise a Refusal, or return the `receive` the app reads the body from."""
        path, method, routes, lim = scope["path"], scope["method"], self.routes, self.limits
        client = (scope.get("client") or ("?", 0))[0]
        headers = dict(scope.get("headers") or [])
        length = content_length(headers)
        if path.startswith(routes.upload):
            limit = lim.upload_body_bytes
        elif path.startswith(routes.live):
            limit = lim.live_body_bytes
        elif path.startswith(routes.mcp):
            limit = lim.mcp_body_bytes
        else:
            limit = lim.body_bytes
        if length is not None and length > limit:
            raise Refusal(413, f"The request body is {length:,} bytes; this route accepts at most {limit:,}.")

        sessions = list(parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_hash", []))
        for prefix in routes.session_in_path:
            if path.startswith(prefix):
                sessions.append(path[len(prefix) :].split("/", 1)[0])
        body = data = None
        form = headers.get(b"content-type", b"").startswith((b"multipart/", b"application/x-www-form"))
        if method == "POST" and not form and not path.startswith((routes.upload, routes.mcp)):
            body = await read_body(receive, limit)  # JSON (the app reads a body without a Content-Type as JSON too)
            data = loads(body)
            if isinstance(data, dict) and data.get("session_hash") is not None:
                sessions.append(data["session_hash"])
        elif path.startswith(routes.live) and method == "POST":
            raise Refusal(415, "The live route accepts a JSON body only, not a form.")

        for s in sessions:
            if not session_id_ok(s):
                what = f"{len(s):,} characters long" if isinstance(s, str) else f"a {type(s).__name__}"
                raise Refusal(400, f"The session id ({what}) is not accepted; expected 1-64 of A-Z a-z 0-9 _ -.")
        held = [s for s in dict.fromkeys(sessions) if s in self.pacing and s not in self.seen]
        new = [s for s in dict.fromkeys(sessions) if s not in self.seen and s not in self.pacing]
        if method == "POST" and not sessions and any(path.startswith(p) for p in routes.fresh_session):
            new.append(None)  # the app opens a session of its own for this call
        if path.startswith(routes.live) and method == "POST":
            if new or held:
                raise Refusal(403, "The live route answers only a session that has used this page's events first.")
            if wait := self.live_calls.take(client):
                raise Refusal(429, "Too many live-route calls from this client; slow down.", wait)
        elif new or held:
            await self._pace(client, new, held)
        if path.startswith(routes.upload) and method == "POST":
            mcp_loopback = client in LOOPBACK and headers.get(b"x-gradio-user") == b"mcp"  # its bytes were charged
            await self._admit_upload(client, length, charged=mcp_loopback)
        elif path.startswith(routes.mcp) and method == "POST" and length:
            await self._admit_upload(client, length)  # data: files in it are written to the upload folder
        if self.check_json is not None and isinstance(data, dict):
            if bad := self.check_json(path, data):
                raise Refusal(422, *bad[:1], detail=bad[1])
        for s in new:
            if s is not None:
                self.seen.add(s)
        for s in sessions:
            self.seen.add(s)  # most recently seen last
            self.pacing.pop(s, None)
        if body is not None:
            return replay(body, receive)
        return counting(receive, limit)

    async def _pace(self, client: str, new: list[str | None], held: list[str]) -> None:
        """Hold the request until its new sessions may start: each takes a token of its client's rate, waiting
        for it up to `new_session_wait` seconds (else 429, naming what is counted), and `new_session_pace` a
        second start (the event loop builds each one's state; this pacing holds a request at most
        `new_session_hold` seconds); a session already held (`held`) waits with it."""
        lim, now, wait = self.limits, self._clock(), 0.0
        if new:
            wait, taken = self.new_sessions.pace(client, len(new), lim.new_session_wait)
            if not taken:
                raise Refusal(
                    429,
                    f"Too many new sessions from your address (every session from it counts together): "
                    f"{lim.new_sessions_per_s * 60:g} a minute, {lim.new_session_burst:g} at once, and those over "
                    f"that wait up to {lim.new_session_wait:,.0f} s for their turn; try again in about "
                    f"{min(wait, 3600):,.0f} s.",
                    wait,
                )
            if self.session_pace is not None:
                wait = max(wait, min(lim.new_session_hold, self.session_pace.reserve(client, len(new))))
            for s in new:
                if s is not None:
                    self.pacing[s] = now + wait
                    while len(self.pacing) > lim.max_sessions:
                        self.pacing.popitem(last=False)
        wait = max([wait] + [self.pacing.get(s, now) - now for s in held])
        if wait > 0:
            await asyncio.sleep(wait)  # a client's burst of new sessions spread out (the event loop builds each)

    async def _admit_upload(self, client: str, length: int | None, charged: bool = False) -> None:
        """Count an upload's bytes against its client's rate (unless `charged` already: an MCP call's file
        sent on by Gradio's loopback client) and the folder's total."""
        if length is None:
            raise Refusal(411, "An upload must state its size (Content-Length).")
        if not charged and (wait := self.uploads.take(client, length)):
            raise Refusal(429, "Too many upload bytes from this client; try again shortly.", wait)
        if not await self.folder.admit(length):
            raise Refusal(507, "The server's upload space is full; try again in a few minutes.", 60.0)
