"""The guard's ASGI plumbing (`attention.crowd.guard`): a refusal answered as JSON (with Retry-After for a
wait), and a request's body read whole, replayed to the app, or counted while the app reads it.

    await answer(send, Refusal(429, "Too many ...", retry_after=3.0))
"""

from __future__ import annotations

import json


class Refusal(Exception):
    """A request answered here: HTTP `status` with `message` (and Retry-After seconds, for 429)."""

    def __init__(self, status: int, message: str, retry_after: float | None = None, detail: object = None):
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after
        self.detail = message if detail is None else detail


def loads(body: bytes | None) -> object:
    """The body as JSON, or None (no body, or not JSON: the app answers malformed JSON itself)."""
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def content_length(headers: dict[bytes, bytes]) -> int | None:
    raw = headers.get(b"content-length")
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise Refusal(400, "The Content-Length header is not a number.") from None


async def read_body(receive, limit: int) -> bytes:
    """The whole body, refused (413) as soon as it passes `limit` bytes."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Refusal(400, "The client went away before sending the whole body.")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise Refusal(413, f"The request body is over {limit:,} bytes, the most this route accepts.")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive):
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def counting(receive, limit: int):
    """`receive`, with the body cut off (as a disconnect) once it passes `limit` bytes."""
    size = 0

    async def counted():
        nonlocal size
        message = await receive()
        if message["type"] == "http.request":
            size += len(message.get("body", b""))
            if size > limit:
                return {"type": "http.disconnect"}
        return message

    return counted


async def answer(send, r: Refusal) -> None:
    body = json.dumps({"detail": r.detail, "error": r.message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if r.retry_after is not None:
        seconds = 3600 if r.retry_after == float("inf") else max(1, int(r.retry_after + 0.999))
        headers.append((b"retry-after", str(seconds).encode()))
    await send({"type": "http.response.start", "status": r.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
