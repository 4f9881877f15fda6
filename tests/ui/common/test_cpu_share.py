"""A crowded address's light jobs compute below everyone else's CPU priority (`attention.ui.common.cpu_share`):
an address with jobs of two sessions, or three jobs, in Gradio's queue runs its light event functions in threads
at ATTENTION_HEAVY_NICE; a lone visitor's run at nice 0 in Gradio's own thread; Gradio still reads each function's
own signature; heavy, async and generator functions are left alone."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import gradio as gr
import pytest
from gradio.context import LocalContext

from attention.crowd.threads import thread_nice
from attention.crowd.visitors import Visitor
from attention.ui.common import cpu_share
from attention.ui.common.admit import HEAVY_QUEUE


def _event(session: str, address: str):
    return SimpleNamespace(_attention_visitor=Visitor(session, address), _attention_counted=True)


def _blocks_with(waiting: list, running: list):
    """A Blocks whose Gradio queue holds `waiting` events in one group and `running` ones started."""
    with gr.Blocks() as blocks:
        n = gr.Number()
        gr.Button().click(lambda x: thread_nice(), n, n)  # a light event: its thread's nice
        gr.Button().click(lambda x: thread_nice(), n, n, **HEAVY_QUEUE)  # the heavy group: left alone

        def streamed(x):
            yield thread_nice()

        gr.Button().click(streamed, n, n)
    group = SimpleNamespace(queue=list(waiting), concurrency_limit=2, current_concurrency=len(running))
    blocks._queue = SimpleNamespace(
        event_queue_per_concurrency_id={"g": group},
        active_jobs=[list(running)],
        get_events=lambda: None,
        process_time_per_fn={},
    )
    return blocks


def _request(session: str, address: str):
    return SimpleNamespace(session_hash=session, client=SimpleNamespace(host=address), headers={}, state=None)


@pytest.mark.parametrize(
    "waiting, running, want",
    [
        ([], [_event("a", "10.0.0.1")], False),  # a visitor alone, its one job running
        ([_event("a", "10.0.0.1")], [_event("a", "10.0.0.1")], False),  # one page's two events
        ([_event("b", "10.0.0.1")], [_event("a", "10.0.0.1")], True),  # two sessions of one address
        ([_event("a", "10.0.0.1")] * 2, [_event("a", "10.0.0.1")], True),  # three jobs of one session
        ([_event("b", "10.0.0.2")] * 5, [_event("a", "10.0.0.1")], False),  # the crowd is another address
    ],
)
def test_an_address_is_crowded_with_two_sessions_or_three_jobs_in_the_queue(waiting, running, want):
    assert cpu_share.crowded(_blocks_with(waiting, running), _request("a", "10.0.0.1")) is want


def test_a_crowded_addresss_light_job_runs_at_the_heavy_nice_and_a_lone_visitors_at_nice_0():
    if not cpu_share.CROWD.nice:
        pytest.skip("no per-thread nice here (not Linux, or CUDA: the work is the GPU's)")
    blocks = _blocks_with([_event("b", "10.0.0.1")], [_event("a", "10.0.0.1")])
    light, heavy, streamed = (f.fn for f in blocks.fns.values())
    before = inspect.signature(light)
    assert cpu_share.share_cpu(blocks) == 1 and cpu_share.share_cpu(blocks) == 0  # light only, once
    wrapped = next(iter(blocks.fns.values())).fn
    assert wrapped is not light and inspect.signature(wrapped) == before  # what Gradio reads is the function's own
    assert [f.fn for f in list(blocks.fns.values())[1:]] == [heavy, streamed]
    token = LocalContext.request.set(_request("a", "10.0.0.1"))
    try:
        assert wrapped(0) == cpu_share.CROWD.nice  # the crowd's job: in a niced thread
        blocks._queue.event_queue_per_concurrency_id["g"].queue.clear()  # the other session's job is done
        assert wrapped(0) == thread_nice()  # a lone visitor again: in Gradio's thread, as it is
    finally:
        LocalContext.request.reset(token)
