"""Spec of attention.crowd.admission: per session and per client address (every session from it together) one
job running and a stated room waiting (an address's sized for a class), the rest refused at once naming what is
counted and when to retry (sized from the job holding the slot); slots shared round-robin between addresses,
then between an address's sessions; a job's time bounded and its slot handed on between chunks. Threads at
once throughout."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from attention.crowd.admission import Lane
from attention.crowd.visitors import Busy, Visitor

A, A2, B, C = Visitor("a", "10.0.0.1"), Visitor("a2", "10.0.0.1"), Visitor("b", "10.0.0.2"), Visitor("c", "10.0.0.3")


def _hold(lane: Lane, v: Visitor, release: threading.Event, started: threading.Event | None = None):
    with lane.turn(v):
        if started is not None:
            started.set()
        release.wait(10)


def test_one_running_and_the_stated_few_waiting_per_visitor_the_rest_refused_at_once():
    lane = Lane("heavy", slots=1, queued=2, max_waiting=16, bound_s=30)
    go, started = threading.Event(), threading.Event()
    outcomes: list[str] = []

    def job(v: Visitor):
        t = time.monotonic()
        try:
            with lane.turn(v):
                started.set()
                go.wait(10)
            outcomes.append("ran")
        except Busy as e:
            assert time.monotonic() - t < 1.0  # at once, not after a wait
            assert "your address (every session from it counts together) already has 1 job running" in str(e)
            assert "Try again in about 1 s" in str(e) and e.retry_after == 1.0  # its job's, not the 30 s bound
            outcomes.append("refused")

    # 12 jobs at once from one client, over 12 sessions: one visitor
    with ThreadPoolExecutor(12) as pool:
        futures = [pool.submit(job, Visitor(f"s{i}", "10.0.0.9")) for i in range(12)]
        deadline = time.monotonic() + 5
        while outcomes.count("refused") < 9 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert outcomes.count("refused") == 9 and started.is_set()
        go.set()
        [f.result() for f in futures]
    assert outcomes.count("ran") == 3


def test_one_session_from_several_addresses_is_one_visitor_too():
    lane = Lane("heavy", slots=2, queued=0)
    release = threading.Event()
    t = threading.Thread(target=_hold, args=(lane, Visitor("s", "10.0.0.1"), release))
    t.start()
    time.sleep(0.1)
    with pytest.raises(Busy, match="this session"):
        with lane.turn(Visitor("s", "10.0.0.77")):
            pass
    with lane.turn(B):  # another visitor takes the free slot
        pass
    release.set()
    t.join()


def test_slots_go_round_robin_so_an_honest_visitor_waits_for_at_most_one_other_job():
    """One client's job runs and five more of it (other sessions) wait; an honest visitor joining after them
    runs next: it waits for the one job running when it came, not for the attacker's queue."""
    lane = Lane("heavy", slots=1, queued=5, max_waiting=32)
    order: list[str] = []
    gate = threading.Event()
    first = threading.Thread(target=_hold, args=(lane, A, gate))
    first.start()
    time.sleep(0.1)

    def job(v: Visitor, name: str):
        with lane.turn(v):
            order.append(name)

    threads = [threading.Thread(target=job, args=(Visitor(f"a{i}", A.client), f"attacker{i}")) for i in range(5)]
    for t in threads:
        t.start()
        time.sleep(0.02)
    honest = threading.Thread(target=job, args=(B, "honest"))
    honest.start()  # joins after the attacker's five
    time.sleep(0.1)
    gate.set()
    for t in [first, *threads, honest]:
        t.join(10)
    assert order[0] == "honest", order  # only the job running when it came ran before it


def test_the_round_goes_to_whoever_was_served_longest_ago():
    """Three visitors with jobs queued, then a fourth: each slot goes to the visitor served longest ago (a
    newcomer before anyone served), so every visitor waits for at most one job of each other."""
    lane = Lane("heavy", slots=1, queued=3, max_waiting=32)
    arrivals = [(A, "a1"), (A2, "a2"), (A, "a3"), (B, "b1"), (B, "b2"), (C, "c1")]
    order = _served_in_turn(lane, arrivals)
    assert order == ["a1", "b1", "c1", "a2", "b2", "a3"], order


def _served_in_turn(lane: Lane, arrivals: list[tuple[Visitor, str]]) -> list[str]:
    """The names of `arrivals` (visitor, name) in the order `lane` served them: each queued 30 ms after the one
    before while another address holds the only slot, then that slot freed."""
    order: list[str] = []
    gate = threading.Event()
    first = threading.Thread(target=_hold, args=(lane, Visitor("x", "10.0.0.99"), gate))
    first.start()
    time.sleep(0.1)

    def job(v: Visitor, name: str):
        with lane.turn(v):
            order.append(name)

    threads = [threading.Thread(target=job, args=a) for a in arrivals]
    for t in threads:
        t.start()
        time.sleep(0.03)
    gate.set()
    for t in [first, *threads]:
        t.join(10)
    return order


def test_a_class_behind_one_address_waits_its_turns_and_another_address_is_served_beside_it():
    """30 sessions of one address at once (a classroom behind its school's NAT) with an address room of 64: all
    30 run, none refused, one of them computing at a time; another address joining after them takes the other
    slot at once (it waits for none of the class's jobs)."""
    lane = Lane("forward", slots=2, queued=1, address_queued=64, max_waiting=256)
    order: list[str] = []
    inside, most = [0], [0]
    lock, go = threading.Lock(), threading.Event()

    def job(v: Visitor, name: str) -> None:
        with lane.turn(v):
            with lock:
                inside[0] += v.client == "10.0.0.9"
                most[0] = max(most[0], inside[0])
            order.append(name)
            go.wait(10)
            time.sleep(0.002)
            with lock:
                inside[0] -= v.client == "10.0.0.9"

    with ThreadPoolExecutor(31) as pool:
        jobs = [pool.submit(job, Visitor(f"student{i}", "10.0.0.9"), f"student{i}") for i in range(30)]
        time.sleep(0.2)
        honest = pool.submit(job, B, "honest")
        time.sleep(0.1)
        assert order[:2] == ["student0", "honest"], order  # the free slot, at once
        go.set()
        [f.result(10) for f in [*jobs, honest]]
    assert len(order) == 31 and most[0] == 1


def test_an_addresss_sessions_take_turns_between_them():
    """One address's jobs queued session by session (three of s1's first): the round goes s1, s2, s3, s1, s1,
    not first come first served."""
    lane = Lane("forward", slots=1, queued=3, address_queued=64, max_waiting=64)
    order = _served_in_turn(lane, [(Visitor(s, "10.0.0.9"), s) for s in ("s1", "s1", "s1", "s2", "s3")])
    assert order == ["s1", "s2", "s3", "s1", "s1"], order


def test_a_refusal_names_what_is_counted_and_the_wait_of_the_job_holding_the_slot():
    now = [0.0]
    lane = Lane("heavy", slots=1, queued=0, address_queued=1, bound_s=120, typical_s=10, clock=lambda: now[0])
    with lane.turn(Visitor("s1", "10.0.0.9")):
        now[0] = 4.0  # a typical job takes 10 s: this one has about 6 s left
        with pytest.raises(Busy, match=r"this session already has 1 job running.*each session may.*about 6 s"):
            lane.reserve(Visitor("s1", "10.0.0.9"))
        lane.reserve(Visitor("s2", "10.0.0.9"))  # another session of the address: its one waiting place
        with pytest.raises(Busy, match=r"your address \(every session from it counts together\)") as e:
            lane.reserve(Visitor("s3", "10.0.0.9"))
        assert e.value.retry_after == 6.0
        now[0] = 5.0
    for _ in range(30):  # short jobs: the typical time follows them, and so does the hint
        with lane.turn(Visitor("s4", "10.0.0.7")):
            now[0] += 0.1
    assert lane.typical_s < 0.2
    with lane.turn(Visitor("s5", "10.0.0.5")):
        with pytest.raises(Busy, match="Try again in about 1 s"):
            lane.reserve(Visitor("s5", "10.0.0.5"))


def test_the_lane_refuses_past_its_waiting_room_for_everyone():
    lane = Lane("heavy", slots=1, queued=1, max_waiting=2)
    release = threading.Event()
    threads = [threading.Thread(target=_hold, args=(lane, v, release)) for v in (A, B, C)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    with pytest.raises(Busy, match="2 jobs waiting from every visitor, the most it holds"):
        lane.reserve(Visitor("d", "10.0.0.4"))
    release.set()
    for t in threads:
        t.join(10)


def test_a_reservation_counts_until_claimed_and_lapses_if_never_claimed():
    now = [0.0]
    lane = Lane("heavy", slots=1, queued=1, reserve_ttl=30, clock=lambda: now[0])
    lane.reserve(A)
    lane.reserve(A)
    with pytest.raises(Busy):
        lane.reserve(A2)  # the same client
    with lane.held(A):  # the handler claims one: a turn inside is not admitted again
        with lane.turn(A):
            assert lane.waiting() == 1  # the other reservation
    now[0] = 31.0  # the other job was dropped before it ran
    assert lane.waiting() == 0
    lane.reserve(A)


def test_a_job_is_stopped_past_its_bound_and_hands_its_slot_on_between_chunks():
    now = [0.0]
    lane = Lane("heavy", slots=1, queued=2, bound_s=10, clock=lambda: now[0])
    with lane.turn(A) as turn:
        turn.pause()  # no one waits: goes on at once
        now[0] = 11.0
        with pytest.raises(Exception, match="ran over its bound of 10 s"):
            turn.check()
    order: list[str] = []
    lane2 = Lane("heavy", slots=1, queued=2)
    b_waiting = threading.Event()

    def other():
        b_waiting.set()
        with lane2.turn(B):
            order.append("B")

    with lane2.turn(A) as turn:
        order.append("A1")
        t = threading.Thread(target=other)
        t.start()
        b_waiting.wait()
        time.sleep(0.1)
        turn.pause()  # B gets the slot now; A's next chunk after it
        order.append("A2")
    t.join(5)
    assert order == ["A1", "B", "A2"]


def test_a_turn_computes_with_the_lanes_torch_threads_restored_after_and_other_threads_untouched():
    """torch.set_num_threads is per thread: the job's thread (a reused worker, as Gradio's) computes with the
    lane's `threads`, gets its own value back after, and the main thread keeps its value meanwhile."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("on CUDA the heavy lane leaves torch's threads as they are")
    lane = Lane("heavy", threads=1)
    main = torch.get_num_threads()
    inside, release = threading.Event(), threading.Event()

    def job() -> tuple[int, int, int]:
        torch.set_num_threads(3)  # the worker's own value, which the turn must give back
        with lane.turn(A):
            during = torch.get_num_threads()
            inside.set()
            release.wait(10)
        return 3, during, torch.get_num_threads()

    with ThreadPoolExecutor(1) as worker:
        fut = worker.submit(job)
        assert inside.wait(10)
        assert torch.get_num_threads() == main  # the main thread's, while the job computes
        release.set()
        assert fut.result(10) == (3, 1, 3)
        assert worker.submit(torch.get_num_threads).result(10) == 3  # the reused worker's value, restored
    assert torch.get_num_threads() == main
    plain = Lane("forward")  # no threads: a turn leaves the thread's value as it is
    with plain.turn(A):
        assert torch.get_num_threads() == main


def test_the_heavy_lane_uses_the_heavy_threads_setting():
    from attention.config import SETTINGS
    from attention.crowd.admission import HEAVY

    assert HEAVY.threads == SETTINGS.heavy_threads >= 0


# ----- the async turn (`Lane.aturn`: MCP tool calls, in the event loop) ------------------------------------


async def _queued(lane: Lane, tasks: list, coro) -> None:
    """Start `coro` as a task and let it reach the lane's queue before the next one comes."""
    tasks.append(asyncio.ensure_future(coro))
    for _ in range(3):
        await asyncio.sleep(0.01)


async def _job(lane: Lane, v: Visitor, name: str, order: list[str]) -> None:
    """A job of `v` that notes its `name` in `order` when its turn comes."""
    async with lane.aturn(v):
        order.append(name)
        await asyncio.sleep(0.01)


def _run(main) -> None:
    """`main` in a new event loop, failing after 20 s (a task never woken would hang otherwise)."""
    asyncio.run(asyncio.wait_for(main, 20))


def _empty(lane: Lane) -> bool:
    idle = lane.waiting() == 0 and lane._busy == 0 and not lane._running and not lane._queue
    return idle and not lane._rota.address and not lane._rota.session


def test_async_turns_go_round_robin_between_visitors_in_the_same_round_as_threads():
    """The arrivals of `test_the_round_goes_to_whoever_was_served_longest_ago`, as asyncio tasks (and one
    client's second job from a thread): the same order, the threads' and the tasks' turns in one round."""
    lane = Lane("mcp", slots=1, queued=3, max_waiting=32)
    order: list[str] = []

    def threaded(v: Visitor, name: str) -> None:
        with lane.turn(v):
            order.append(name)

    async def main() -> None:
        first = lane.aturn(Visitor("x", "10.0.0.9"))
        await first.__aenter__()  # holds the only slot while the others queue
        tasks: list = []
        await _queued(lane, tasks, _job(lane, A, "a1", order))
        t = threading.Thread(target=threaded, args=(A2, "a2"))
        t.start()
        await asyncio.sleep(0.05)
        for v, name in ((A, "a3"), (B, "b1"), (B, "b2"), (C, "c1")):
            await _queued(lane, tasks, _job(lane, v, name, order))
        await first.__aexit__(None, None, None)
        await asyncio.gather(*tasks)
        await asyncio.to_thread(t.join, 10)

    _run(main())
    assert order == ["a1", "b1", "c1", "a2", "b2", "a3"], order
    assert _empty(lane)


def test_an_async_call_over_its_visitors_share_is_refused_at_once():
    lane = Lane("mcp", slots=1, queued=1, bound_s=60)

    async def main() -> None:
        held = lane.aturn(A)
        await held.__aenter__()
        tasks: list = []
        await _queued(lane, tasks, held_until(lane, A2, asyncio.Event()))  # A's client: its one waiting
        started = time.monotonic()
        with pytest.raises(
            Busy,
            match=r"your address \(every session from it counts together\) already has 1 job running and 1 "
            r"waiting.*Try again in about 1 s",
        ):
            async with lane.aturn(Visitor("a3", A.client)):
                pass
        assert time.monotonic() - started < 0.5
        tasks[0].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await held.__aexit__(None, None, None)

    _run(main())
    assert _empty(lane)


async def held_until(lane: Lane, v: Visitor, release: asyncio.Event) -> None:
    async with lane.aturn(v):
        await release.wait()


def test_a_call_cancelled_while_waiting_leaves_nothing_behind():
    """A task waiting for its turn is cancelled (its MCP client went away) after its client was served: its
    place is given up, its client forgotten by the round (a newcomer again), the counts back to zero once the
    rest finish, and the next visitor is granted."""
    lane = Lane("mcp", slots=1, queued=2)
    order: list[str] = []

    async def main() -> None:
        holder = lane.aturn(A)
        await holder.__aenter__()  # A's client served
        tasks: list = []
        release_b = asyncio.Event()
        await _queued(lane, tasks, _job(lane, A2, "a2", order))
        await _queued(lane, tasks, held_until(lane, B, release_b))
        await holder.__aexit__(None, None, None)  # B, never served, before A's second job
        await asyncio.sleep(0.01)
        assert lane._busy == 1 and "c:10.0.0.2" in lane._running and lane.waiting() == 1
        tasks[0].cancel()  # a2 leaves the queue
        await asyncio.gather(tasks[0], return_exceptions=True)
        assert lane.waiting() == 0 and not lane._queue and set(lane._rota.address) == {"c:10.0.0.2"}
        await _queued(lane, tasks, _job(lane, C, "c1", order))
        release_b.set()
        await asyncio.gather(*tasks[1:])

    _run(main())
    assert order == ["c1"] and _empty(lane)


def test_a_call_cancelled_after_its_grant_frees_the_slot():
    """Cancelled inside its turn, or granted and cancelled before it resumed: either way the slot goes on."""
    lane = Lane("mcp", slots=1, queued=2)
    order: list[str] = []

    async def main() -> None:
        inside = asyncio.ensure_future(held_until(lane, A, asyncio.Event()))  # never released: cancelled inside
        await asyncio.sleep(0.01)
        assert lane._busy == 1
        inside.cancel()
        await asyncio.gather(inside, return_exceptions=True)
        assert _empty(lane)

        holder = lane.aturn(Visitor("x", "10.0.0.9"))
        await holder.__aenter__()
        tasks: list = []
        await _queued(lane, tasks, _job(lane, A, "a1", order))
        await _queued(lane, tasks, _job(lane, B, "b1", order))
        await holder.__aexit__(None, None, None)  # grants a1, which has not run yet ...
        assert lane._busy == 1 and "c:10.0.0.1" in lane._running
        tasks[0].cancel()  # ... and is cancelled before it resumes
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)

    _run(main())
    assert order == ["b1"] and _empty(lane)
