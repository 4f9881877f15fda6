"""Answers that are the same for everyone, computed once: a plain ASGI middleware that keeps the whole
answer to a GET of some paths and sends it again to the next asker with the same key.

Gradio builds its `/config` answer anew for every asker (a deep copy of the whole page's description,
walked again to put the root URL in, then serialised: about 0.1 s of a core here, holding the
interpreter), and every gradio_client `Client` asks for it once. Twenty sessions opened at once then
cost two seconds that every other visitor's upload, join and download waits behind. The answer
depends only on the app (`version()`: a new value means a new app, and what was kept is dropped) and on
the parts of the request that make the root URL (the path and query, the scheme, the host and the
forwarding headers), so it is kept per such key.

Bounds: at most `max_entries` answers (least recently used first out), each kept only when it is a
whole 200 answer of at most `max_bytes`; askers of a key being computed wait for that one computation
rather than start their own. A request with a cookie or an authorization header is never served from
here (an app with logins answers each user their own).

    app = Memo(app, paths={"/config"}, version=lambda: id(blocks.config))
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable

KEY_HEADERS = (b"host", b"x-forwarded-host", b"x-forwarded-proto", b"x-forwarded-port", b"forwarded")
PRIVATE = (b"cookie", b"authorization")


class Memo:
    """The ASGI middleware (see the module's doc). `hits` and `misses` count the askers of kept paths."""

    def __init__(
        self,
        app,
        paths: set[str] | frozenset[str],
        version: Callable[[], object],
        max_entries: int = 16,
        max_bytes: int = 8 << 20,
    ):
        self.app, self.paths, self.version = app, frozenset(paths), version
        self.max_entries, self.max_bytes = int(max_entries), int(max_bytes)
        self.kept: OrderedDict[tuple, tuple[dict, bytes]] = OrderedDict()
        self.pending: dict[tuple, asyncio.Event] = {}
        self.hits = self.misses = 0
        self._version: object = None

    def key(self, scope) -> tuple | None:
        """What the answer depends on, or None when it must not be kept (not a GET of a kept path, private)."""
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"] not in self.paths:
            return None
        headers = dict(scope["headers"])
        if any(h in headers for h in PRIVATE):
            return None
        kind = (scope["path"], scope.get("query_string", b""), scope.get("scheme"), scope.get("root_path", ""))
        return kind + tuple(headers.get(h) for h in KEY_HEADERS)

    async def __call__(self, scope, receive, send):
        key = self.key(scope)
        if key is None:
            return await self.app(scope, receive, send)
        version = self.version()
        if version != self._version:  # a new app: nothing kept is its answer
            self.kept.clear()
            self._version = version
        while key in self.pending:  # the same answer is being made: wait for it
            await self.pending[key].wait()
        if key in self.kept:
            self.hits += 1
            self.kept.move_to_end(key)
            start, body = self.kept[key]
            await send(start)
            await send({"type": "http.response.body", "body": body})
            return
        self.misses += 1
        done = self.pending[key] = asyncio.Event()
        start: dict = {}
        chunks: list[bytes] = []
        whole = [False]

        async def keeping(message):
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                whole[0] = not message.get("more_body", False)
            await send(message)

        try:
            await self.app(scope, receive, keeping)
            body = b"".join(chunks)
            if start.get("status") == 200 and whole[0] and len(body) <= self.max_bytes:
                self.kept[key] = (dict(start), body)
                while len(self.kept) > self.max_entries:
                    self.kept.popitem(last=False)
        finally:
            del self.pending[key]
            done.set()
