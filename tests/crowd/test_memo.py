"""Spec of attention.crowd.memo: an answer that is the same for every asker of a key is made once, sent again
whole, and never to an asker whose answer may differ (another host, a cookie, another app)."""

from __future__ import annotations

import asyncio

from attention.crowd.memo import Memo


class Config:
    """A toy app: GET /config answers the host it was asked on, slowly; counts how often it made an answer."""

    def __init__(self, status: int = 200, chunks: int = 1):
        self.made, self.status, self.chunks = 0, status, chunks

    async def __call__(self, scope, receive, send):
        self.made += 1
        await asyncio.sleep(0.01)
        host = dict(scope["headers"]).get(b"x-forwarded-host") or dict(scope["headers"]).get(b"host", b"")
        body = b'{"root": "http://' + host + b'"}'
        await send({"type": "http.response.start", "status": self.status, "headers": [(b"x-n", b"%d" % self.made)]})
        for i in range(self.chunks):
            await send({"type": "http.response.body", "body": body, "more_body": i < self.chunks - 1})


def ask(memo, path="/config", method="GET", **headers) -> tuple[int, bytes, dict]:
    """One request through `memo`: (status, body, headers)."""
    return asyncio.run(_ask(memo, path, method, headers))


async def _ask(memo, path, method, headers):
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    h = [(k.replace("_", "-").encode(), v.encode()) for k, v in {"host": "a.example", **headers}.items()]
    await memo({"type": "http", "method": method, "path": path, "query_string": b"", "headers": h}, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]), dict(sent[0]["headers"])


def test_the_same_answer_is_made_once_and_sent_again_whole():
    app = Config()
    memo = Memo(app, paths={"/config"}, version=lambda: 1)
    first, again = ask(memo), ask(memo)
    assert first == again == (200, b'{"root": "http://a.example"}', {b"x-n": b"1"})
    assert app.made == 1 and (memo.hits, memo.misses) == (1, 1)


def test_each_host_gets_its_own_root_and_other_paths_pass_through():
    app = Config()
    memo = Memo(app, paths={"/config"}, version=lambda: 1)
    assert ask(memo)[1] != ask(memo, x_forwarded_host="b.example")[1] == b'{"root": "http://b.example"}'
    assert ask(memo, host="c.example")[1] == b'{"root": "http://c.example"}' and app.made == 3
    ask(memo, path="/info"), ask(memo, path="/info"), ask(memo, method="POST"), ask(memo, method="POST")
    assert app.made == 7  # never kept: another path, another method


def test_a_private_request_a_failure_or_a_new_app_is_made_anew():
    app = Config()
    version = [1]
    memo = Memo(app, paths={"/config"}, version=lambda: version[0])
    ask(memo, cookie="session=1"), ask(memo, cookie="session=1"), ask(memo, authorization="Bearer x")
    assert app.made == 3  # a login may change the answer: never kept
    ask(memo), ask(memo)
    version[0] = 2  # a new app: its own answer
    ask(memo)
    assert app.made == 5
    failing = Config(status=500)
    memo = Memo(failing, paths={"/config"}, version=lambda: 1)
    ask(memo), ask(memo)
    assert failing.made == 2


def test_askers_at_once_wait_for_one_answer_and_the_kept_answers_are_bounded():
    app = Config(chunks=3)  # an answer sent in pieces is kept whole

    async def many():
        memo = Memo(app, paths={"/config"}, version=lambda: 1, max_entries=2)
        got = await asyncio.gather(*(_ask(memo, "/config", "GET", {}) for _ in range(20)))
        for host in ("b", "c", "d"):
            await _ask(memo, "/config", "GET", {"host": host})
        return memo, got

    memo, got = asyncio.run(many())
    assert app.made == 4 and len({g[1] for g in got}) == 1 and got[0][1].count(b"root") == 3
    assert len(memo.kept) == 2  # the least recently used first out
    big = Memo(Config(), paths={"/config"}, version=lambda: 1, max_bytes=10)
    ask(big)
    assert not big.kept  # over max_bytes: sent, not kept
