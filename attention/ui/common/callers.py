"""Who a Gradio request is for (`attention.crowd.visitors.Visitor`: session and client address).

The client address is the one the guard resolved (`attention.crowd.clients.Proxies`: trusted proxy hops
only, never a visitor's own X-Forwarded-For) and put in the request's scope. An MCP call reaches the queue
through Gradio's own loopback client, one session for every MCP client; the guard signs the MCP caller's
address and MCP session into the `VISITOR_HEADER` of that call (`attention.crowd.guard`), so each MCP client
is its own visitor here. The signature is checked here again (`mcp_caller`): a header a visitor writes makes
no one else of them, whether the guard stands in front or not (ATTENTION_GUARD=0).

    visitor_of(request)   # gr.Request or Starlette's -> Visitor
    who()                 # the Visitor of the event being handled
"""

from __future__ import annotations

from attention.crowd.clients import VISITOR_HEADER, verify
from attention.crowd.visitors import Visitor


def mcp_caller(request) -> tuple[str, str] | None:
    """(client address, MCP session) of a call Gradio's MCP server makes for an MCP caller: its
    `VISITOR_HEADER`, signed by this process's guard (`attention.crowd.clients.verify`). A header this
    process did not sign (a visitor's own, with or without the guard in front: ATTENTION_GUARD=0) is None."""
    headers = getattr(request, "headers", None) or {}
    value = headers.get(VISITOR_HEADER) if hasattr(headers, "get") else None
    return verify(value) if isinstance(value, str) else None


def visitor_of(request) -> Visitor:
    """The Visitor of a request (gr.Request or Starlette's): the MCP caller the guard signed (`mcp_caller`: its
    MCP session, if it has one, and its address), else the session id and the client address (the guard's
    resolved one)."""
    if request is None:
        return Visitor()
    if caller := mcp_caller(request):
        addr, mcp = caller  # an MCP session's calls are its own; without one, the caller is its address alone
        return Visitor(f"mcp-{mcp}" if mcp else None, addr)
    client = getattr(getattr(request, "client", None), "host", None)
    return Visitor(getattr(request, "session_hash", None), client)


def who() -> Visitor:
    """The Visitor of the event being handled (Gradio's request context); empty outside one."""
    from gradio.context import LocalContext

    return visitor_of(LocalContext.request.get(None))
