"""Who a Gradio event is for (`attention.crowd.visitors.Visitor`: session and client address), and the
validator that admits a computing job before it joins Gradio's queue.

The client address is the one the guard resolved (`attention.crowd.clients.Proxies`: trusted proxy
hops only, never a visitor's own X-Forwarded-For) and put in the request's scope. An MCP call reaches
the queue through Gradio's own loopback client, one session for every MCP client; the guard signs
the MCP caller's address and MCP session into the `VISITOR_HEADER` of that call (`attention.crowd.guard`), so
each MCP client is its own visitor here. The signature is checked here again (`mcp_caller`): a header a
visitor writes makes no one else of them, whether the guard stands in front or not (ATTENTION_GUARD=0).
An MCP tool call of a light endpoint is held whole in the MCP lane (`gate_mcp_calls`, around Gradio's MCP
server's tool-call handler): a crowd of agents never takes the page's visitors' share.

Gradio's own queue (jobs waiting for one of an event's workers) is served by the lanes' rule too
(`attention.ui.common.fair_queue`: round-robin between client addresses, then between an address's sessions,
instead of first come first served), and a job is admitted to it by its session's, its address's and everyone's
count of jobs waiting or running there (`queue_room`: ATTENTION_VISITOR_JOBS, ATTENTION_ADDRESS_WAITING,
ATTENTION_QUEUE_WAITING), refused beyond them with why and when to retry. A refusal is held
ATTENTION_REFUSAL_DELAY seconds before it is answered (an asyncio sleep), as the guard holds a flood's: a
client looping on refusals gets one a second, not hundreds.

    event(fn, inputs, outputs, validator=heavy_share(HEAVY), concurrency_id="heavy", ...)
    with HEAVY.turn(who()) as turn: ...   # in the handler
    gate_mcp_calls(blocks.mcp_server_obj)  # at launch (attention.ui.common.server.gate_mcp)
    fair_queue(blocks)                     # at launch (attention.ui.common.server.LaunchKwargs)
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

import gradio as gr

from attention.config import SETTINGS
from attention.crowd.admission import HEAVY, MCP, Lane
from attention.crowd.visitors import Busy
from attention.ui.common.callers import mcp_caller, visitor_of, who
from attention.ui.common.fair_queue import door

__all__ = [  # `mcp_caller`, `visitor_of` and `who` live in attention.ui.common.callers, named here as before
    "HEAVY_QUEUE",
    "gate_mcp_calls",
    "heavy_endpoint",
    "heavy_share",
    "in_lane",
    "mcp_caller",
    "visitor_of",
    "who",
]

HEAVY_QUEUE = dict(concurrency_id="heavy", concurrency_limit=SETTINGS.heavy_slots + SETTINGS.heavy_waiting)
"""Gradio's queue for heavy events: up to ATTENTION_HEAVY_SLOTS + ATTENTION_HEAVY_WAITING admitted jobs start and
wait in `HEAVY`'s round (one thread each); more wait in Gradio's queue, which serves them by the same rule
(`attention.ui.common.fair_queue`), holding no thread."""


def heavy_share(lane: Lane = HEAVY, validator: Callable | None = None) -> Callable:
    """A queue validator that admits the job by the queue's rooms (`attention.ui.common.fair_queue.door`: a session's,
    an address's, everyone's jobs waiting or running) and reserves its place in `lane` for its visitor, or
    refuses it (a failed validation of the first input, with why and when to retry, held a moment), then runs
    `validator`, if any. The handler claims the reservation with `lane.turn(who())`."""
    return door(validator, lane)


def in_lane(fn: Callable, lane: Lane = HEAVY) -> Callable:
    """`fn` (a handler, not a generator) run in `lane`'s threads (`Lane.call`: at ATTENTION_HEAVY_NICE on the CPU,
    below the light lane's forwards), its turn taken there; Gradio sees `fn`'s signature and docstring."""

    @functools.wraps(fn)
    def handler(*args, **kwargs):
        return lane.call(fn, *args, **kwargs)

    return handler


def heavy_endpoint(fn: Callable, name: str, inputs: list, outputs: list) -> None:
    """Register `fn` as the public API endpoint /`name` in the heavy lane by a button (made where this is
    called: inside a hidden row), its queue HEAVY_QUEUE and `heavy_share` admitting each visitor as they ask;
    `fn` runs in the lane's threads (`in_lane`)."""
    gr.Button(name).click(
        in_lane(fn), inputs, outputs, api_name=name, api_visibility="public", validator=heavy_share(), **HEAVY_QUEUE
    )


def gate_mcp_calls(mcp_server_obj, lane: Lane = MCP) -> None:
    """Every MCP tool call of a light endpoint held whole in `lane` (Gradio's loopback upload, its queue and the
    result's postprocessing included): `mcp_server_obj` (Gradio's GradioMCPServer) gets its CallToolRequest
    handler wrapped, which serves both MCP transports. The caller is `visitor_of` the MCP request (the caller
    the guard signed; without the guard, its peer address); a call over its caller's share or the lane's
    waiting room is answered with `Busy`'s message (what is counted, when to retry) as a tool error, held
    ATTENTION_REFUSAL_DELAY seconds first. Tools of heavy endpoints (Gradio's
    `concurrency_id` of HEAVY_QUEUE) pass: the heavy lane admits them by the same caller. Installing twice
    wraps once. RuntimeError (at start-up) if Gradio's MCP server no longer has what this reads."""
    import mcp.types as types

    server = getattr(mcp_server_obj, "mcp_server", None)
    handlers = getattr(server, "request_handlers", None)
    handle = handlers.get(types.CallToolRequest) if isinstance(handlers, dict) else None
    tools, block_fn = (
        getattr(mcp_server_obj, "tool_to_endpoint", None),
        getattr(mcp_server_obj, "get_block_fn_from_endpoint_name", None),
    )
    if (
        handle is None
        or not isinstance(tools, dict)
        or block_fn is None
        or not hasattr(type(server), "request_context")
    ):
        raise RuntimeError(
            f"gradio {gr.__version__}'s MCP server has no CallToolRequest handler, tool_to_endpoint, "
            "get_block_fn_from_endpoint_name or request_context where attention.ui.common.admit.gate_mcp_calls wraps "
            "its tool calls (the MCP lane would not hold them)."
        )
    if getattr(handle, "lane", None) is not None:
        return
    heavy = {
        t for t, e in tools.items() if getattr(block_fn(e), "concurrency_id", None) == HEAVY_QUEUE["concurrency_id"]
    }

    async def gated(req: types.CallToolRequest) -> types.ServerResult:
        if req.params.name in heavy:
            return await handle(req)
        try:
            async with lane.aturn(visitor_of(server.request_context.request)):
                return await handle(req)
        except Busy as e:
            await asyncio.sleep(SETTINGS.refusal_delay)  # held, as the guard holds a flood's: a looping agent waits
            return types.ServerResult(
                types.CallToolResult(isError=True, content=[types.TextContent(type="text", text=str(e))])
            )

    gated.lane, gated.heavy = lane, frozenset(heavy)  # what it does, for a look (tests)
    handlers[types.CallToolRequest] = gated
