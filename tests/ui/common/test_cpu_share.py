"""A crowded address's jobs compute below a lone visitor's CPU priority (`attention.ui.common.cpu_share`): an
address with jobs of two sessions, or three jobs, in Gradio's queue runs its light event functions in threads at
ATTENTION_CROWD_NICE, and its heavy ones (plain or generators) in their lane's crowd threads, at the same nice; a
lone visitor's light jobs run at nice 0 in Gradio's own thread, its heavy ones at the lane's own nice; Gradio still
reads each function's own signature; async functions and light generators are left alone."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import gradio as gr
import pytest
from gradio.context import LocalContext

from attention.crowd.admission import Lane
from attention.crowd.threads import thread_nice
from attention.crowd.visitors import Visitor
from attention.ui.common import cpu_share
from attention.ui.common.admit import HEAVY_QUEUE


def _event(session: str, address: str):
    return SimpleNamespace(_attention_visitor=Visitor(session, address), _attention_counted=True)


LANE = Lane("test", nice=2, crowd_nice=4)  # a heavy lane: its own threads at nice 2, its crowd's at 4


def _blocks_with(waiting: list, running: list):
    """A Blocks whose Gradio queue holds `waiting` events in one group and `running` ones started."""
    with gr.Blocks() as blocks:
        n = gr.Number()
        gr.Button().click(lambda x: thread_nice(), n, n)  # a light event: its thread's nice
        gr.Button().click(lambda x: LANE.call(thread_nice), n, n, **HEAVY_QUEUE)  # a heavy one: its lane's

        def streamed(x):
            yield thread_nice()

        def heavy_streamed(x):
            yield LANE.threads_now().submit(thread_nice).result()  # as a video's job thread is started

        gr.Button().click(streamed, n, n)
        gr.Button().click(heavy_streamed, n, n, **HEAVY_QUEUE)
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


def test_a_crowded_addresss_jobs_run_at_the_crowd_nice_and_a_lone_visitors_at_their_lanes():
    if not cpu_share.CROWD.nice or not LANE.pool.nice or thread_nice() >= LANE.pool.nice:
        pytest.skip("no per-thread nice here (not Linux, CUDA: the work is the GPU's, or the test run niced)")
    blocks = _blocks_with([_event("b", "10.0.0.1")], [_event("a", "10.0.0.1")])
    light, heavy, streamed, heavy_streamed = (f.fn for f in blocks.fns.values())
    before = [inspect.signature(f) for f in (light, heavy, heavy_streamed)]
    assert cpu_share.share_cpu(blocks) == 3 and cpu_share.share_cpu(blocks) == 0  # all but a light generator, once
    fns = [f.fn for f in blocks.fns.values()]
    assert fns[2] is streamed and all(f is not g for f, g in zip(fns, (light, heavy, None, heavy_streamed)))
    assert [inspect.signature(f) for f in (fns[0], fns[1], fns[3])] == before  # what Gradio reads: the function's
    assert inspect.isgeneratorfunction(fns[3])
    token = LocalContext.request.set(_request("a", "10.0.0.1"))
    try:
        crowd = cpu_share.CROWD.nice
        assert (fns[0](0), fns[1](0), list(fns[3](0))) == (crowd, 4, [4])  # the crowd's jobs: all below
        blocks._queue.event_queue_per_concurrency_id["g"].queue.clear()  # the other session's job is done
        here = thread_nice()
        assert (fns[0](0), fns[1](0), list(fns[3](0))) == (here, 2, [2])  # a lone visitor: light as it is, heavy 2
    finally:
        LocalContext.request.reset(token)
