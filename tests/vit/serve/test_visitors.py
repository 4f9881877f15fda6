"""A crowd's share of the pass store: a pass's counted bytes cover everything it holds; a visitor's
new passes push out only that visitor's own old ones (threads included); an upload's pass is its
visitor's alone while examples stay shared; a visitor keeps at most a stated number of jobs in the
queue."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError, ValidationError
from PIL import Image

from attention.config import SETTINGS
from attention.crowd.cache import SharedCache
from attention.vit.serve import passes

ROOT = Path(__file__).resolve().parents[3]
DIGITS = [str(ROOT / "examples" / "digits" / f"digit_{i}.png") for i in range(10)]


class Blob:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes


def held_bytes(obj) -> int:
    """Oracle: the bytes of every array buffer, tensor storage and picture reachable from `obj`
    (attributes, dicts, lists, tuples), each buffer once (a numpy view of a tensor is the tensor's
    memory), found by walking the objects, not from `Pass.nbytes`'s formula."""
    seen_objs, buffers = set(), {}

    def walk(o):
        if id(o) in seen_objs or o is None or isinstance(o, (str, bytes, int, float, bool, type)):
            return
        seen_objs.add(id(o))
        if isinstance(o, np.ndarray):
            base = o
            while isinstance(base.base, np.ndarray):
                base = base.base
            if base.base is not None and not isinstance(base.base, np.ndarray):  # a view of torch memory
                walk(base.base)
            at = base.__array_interface__["data"][0]
            buffers[at] = max(buffers.get(at, 0), base.nbytes)
        elif isinstance(o, torch.Tensor):
            st = o.untyped_storage()
            buffers[st.data_ptr()] = max(buffers.get(st.data_ptr(), 0), st.nbytes())
        elif isinstance(o, Image.Image):
            buffers[id(o)] = o.width * o.height * len(o.getbands())
        elif isinstance(o, dict):
            for k, v in o.items():
                walk(k)
                walk(v)
        elif isinstance(o, (list, tuple, set, frozenset)):
            for v in o:
                walk(v)
        elif hasattr(o, "__dict__"):
            walk(vars(o))

    walk(obj)
    return sum(buffers.values())


def test_a_pass_counts_at_least_the_bytes_of_everything_it_holds():
    p = passes.get_pass(DIGITS[2], "mnist_vit", 56)  # a 14x14 grid, 4 layers, 4 heads, q/k and tokens kept
    gh, gw = p.base.grid
    for i in range(p.MEMO + 1):  # every memo full: queries, rollouts, features
        q = (i % gh, (3 * i) % gw)
        p.at(q, -1)
        p.rollout(q, -1, head_fusion="max" if i % 2 else "mean")
    p.feature_maps((1, 1), -1)
    held = held_bytes(p)
    assert held > 0.5 * p.nbytes  # the walk found the big buffers (q/k, tokens, rows)
    assert p.nbytes >= held, (p.nbytes, held)


def test_a_visitors_new_values_push_out_only_their_own_old_ones():
    store: SharedCache[Blob] = SharedCache(max_bytes=1000, ttl=60, max_owner_bytes=300)
    store.put("b1", Blob(100), owner="B")
    for i in range(50):  # A floods
        store.put(f"a{i}", Blob(100), owner="A")
    assert store.get("b1") is not None and store.owned("A") == 300 and store.owned("B") == 100
    assert [store.get(f"a{i}") is not None for i in (46, 47, 48, 49)] == [False, True, True, True]
    store.put("too big for one visitor", Blob(301), owner="C")  # over the share: returned, not kept
    assert store.get("too big for one visitor") is None and store.nbytes == 400


def test_a_full_store_drops_from_whoever_holds_the_most():
    store: SharedCache[Blob] = SharedCache(max_bytes=500, ttl=60, max_owner_bytes=300)
    store.put("b1", Blob(100), owner="B")
    store.put("c1", Blob(100), owner="C")
    for i in range(3):
        store.put(f"a{i}", Blob(100), owner="A")  # 500: full
    store.put("d1", Blob(100), owner="D")  # a newcomer: the largest holder (A) gives way, not B or C
    assert store.owned("A") == 200 and all(store.get(k) is not None for k in ("b1", "c1", "d1"))
    assert store.nbytes <= store.max_bytes


def test_many_threads_of_one_visitor_never_push_out_another_visitors_value():
    store: SharedCache[Blob] = SharedCache(max_bytes=1000, ttl=60, max_owner_bytes=400)
    store.put("b", Blob(200), owner="B")
    barrier = threading.Barrier(8)

    def flood(t):
        barrier.wait()
        for i in range(200):
            store.get_or_run(f"a{t}-{i}", lambda: Blob(50), owner="A")
            assert store.nbytes <= store.max_bytes
        return store.owned("A")

    with ThreadPoolExecutor(8) as ex:
        owned = list(ex.map(flood, range(8)))
    assert store.get("b") is not None and max(owned) <= 400 and store.owned("A") <= 400
    assert sum(store.owned(o) for o in ("A", "B")) == store.nbytes


def test_real_passes_one_visitors_many_uploads_leave_anothers_pass_alive(tmp_path):
    one = passes.get_pass(DIGITS[0], "mnist_vit", 56).nbytes
    store: SharedCache = SharedCache(max_bytes=6 * one, ttl=60, max_owner_bytes=3 * one)
    b = passes.get_pass(_upload(tmp_path, 99), "mnist_vit", 56, cache=store, visitor="B")

    def a(i):
        return passes.get_pass(_upload(tmp_path, i), "mnist_vit", 56, cache=store, visitor="A").key

    with ThreadPoolExecutor(4) as ex:
        list(ex.map(a, range(12)))
    assert store.get(b.key) is b and store.owned("A") <= 3 * one and store.nbytes <= store.max_bytes


def test_two_visitors_uploading_the_same_bytes_get_passes_of_their_own(tmp_path):
    store: SharedCache = SharedCache(max_bytes=1 << 30, ttl=60, max_owner_bytes=1 << 28)
    path = _upload(tmp_path, 7)
    a = passes.get_pass(path, "mnist_vit", "auto", cache=store, visitor="A")
    b = passes.get_pass(path, "mnist_vit", "auto", cache=store, visitor="B")
    assert a is not b and a.key[:3] == b.key[:3] and store.computed == 2  # two forwards: no shared timing
    assert passes.get_pass(path, "mnist_vit", "auto", cache=store, visitor="A") is a  # each keeps their own
    assert store.owned("A") == a.nbytes and store.owned("B") == b.nbytes


def test_the_sessions_of_one_address_share_its_bound_in_the_store(tmp_path):
    from attention.crowd.visitors import Visitor

    one = passes.get_pass(DIGITS[0], "mnist_vit", 56).nbytes
    store: SharedCache = SharedCache(max_bytes=1 << 30, ttl=60, max_owner_bytes=3 * one, max_group_bytes=4 * one)
    for i in range(10):  # ten sessions of one address, a pass each
        passes.get_pass(_upload(tmp_path, i), "mnist_vit", 56, cache=store, visitor=Visitor(f"s{i}", "10.0.0.9"))
    lone = passes.get_pass(_upload(tmp_path, 50), "mnist_vit", 56, cache=store, visitor=Visitor("t", "10.0.0.8"))
    assert store.group_owned("c:10.0.0.9") == 4 * one and store.owned(("c:10.0.0.9", "s9")) == one
    assert store.get(lone.key) is lone and store.group_owned("c:10.0.0.8") == one


def test_the_sessions_of_one_address_from_four_threads_at_once_each_get_their_own_pass(tmp_path):
    from attention.crowd.visitors import Visitor

    one = passes.get_pass(DIGITS[0], "mnist_vit", 56).nbytes
    store: SharedCache = SharedCache(max_bytes=1 << 30, ttl=60, max_owner_bytes=3 * one, max_group_bytes=4 * one)
    lone = passes.get_pass(_upload(tmp_path, 50), "mnist_vit", 56, cache=store, visitor=Visitor("t", "10.0.0.8"))

    def session(i):
        return passes.get_pass(_upload(tmp_path, i), "mnist_vit", 56, cache=store, visitor=Visitor(f"s{i}", "10.0.0.9"))

    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(session, range(10)))
    assert [p.key[3] for p in got] == [f"s{i}" for i in range(10)] and store.computed == 11  # each its own
    assert store.group_owned("c:10.0.0.9") == 4 * one and store.nbytes == 5 * one
    assert store.get(lone.key) is lone and store.group_owned("c:10.0.0.8") == one


def test_examples_stay_shared_between_visitors():
    store: SharedCache = SharedCache(max_bytes=1 << 30, ttl=60, max_owner_bytes=1 << 28)
    a = passes.get_pass(DIGITS[5], "mnist_vit", "auto", cache=store, visitor="A")
    b = passes.get_pass(DIGITS[5], "mnist_vit", "auto", cache=store, visitor="B")
    assert a is b and store.computed == 1 and store.owned("examples") == a.nbytes and a.key[3] == ""


def _upload(tmp_path, seed: int) -> str:
    """A 40x40 picture of noise that is no shipped example, as an uploaded file."""
    path = tmp_path / f"upload_{seed}.png"
    if not path.exists():
        Image.fromarray((np.random.default_rng(seed).random((40, 40, 3)) * 255).astype("uint8")).save(path)
    return str(path)


def test_a_visitor_keeps_at_most_the_stated_jobs_in_the_queue_and_another_is_served(app_url, tmp_path):
    limit = SETTINGS.visitor_jobs
    pictures = [_big_upload(tmp_path, i) for i in range(limit + 4)]
    a = Client(app_url, verbose=False)
    jobs = [a.submit(handle_file(p), "mnist_vit", -1, "384", api_name="/attention_maps") for p in pictures]
    outcomes = []
    for j in jobs:
        try:
            j.result()
            outcomes.append("done")
        except ValidationError as e:  # at the queue's door: never queued
            assert f"each session may have {limit}" in str(e)
            outcomes.append("not queued")
        except AppError as e:  # queued, then refused at once: the visitor's turn was taken
            assert "Not queued" in str(e) and "1 running" in str(e)
            outcomes.append("no turn")
    # beyond the stated jobs each is refused: at the door, or (a turn refused at once, computing nothing) when
    # one of the visitor's refused jobs left Gradio's count before the next joined
    refused = outcomes.count("not queued") + outcomes.count("no turn")
    assert refused >= len(pictures) - limit and 1 <= outcomes.count("done") <= limit
    b = Client(app_url, verbose=False)
    _, _, info = b.predict(handle_file(DIGITS[1]), "mnist_vit", api_name="/attention_maps")
    assert info["model"] == "mnist_vit"


def _big_upload(tmp_path, seed: int) -> str:
    path = tmp_path / f"big_{seed}.png"
    Image.fromarray((np.random.default_rng(100 + seed).random((384, 384, 3)) * 255).astype("uint8")).save(path)
    return str(path)


def test_a_visitor_gets_one_turn_and_another_visitor_is_not_held_up():
    from attention.crowd.admission import Lane
    from attention.crowd.visitors import Busy, Visitor

    turns = Lane("forward", slots=4, queued=0)
    A, B = Visitor("A", "10.0.0.1"), Visitor("B", "10.0.0.2")
    with turns.turn(A):
        with pytest.raises(Busy, match="Not queued"):
            with turns.turn(A):
                pass
        with pytest.raises(Busy, match="your address"):  # another session of the same client: the same visitor
            with turns.turn(Visitor("A2", "10.0.0.1")):
                pass
        with turns.turn(B):  # others are not held up
            pass
    with turns.turn(A):  # the turn is given back, after an error too
        pass
    with pytest.raises(ValueError):
        with turns.turn(A):
            raise ValueError
    with turns.turn(A):
        pass


def test_threads_of_one_visitor_never_run_two_forwards_at_once(tmp_path):
    from attention.crowd.admission import Lane
    from attention.crowd.visitors import Visitor
    from attention.errors import BudgetError

    turns, running, most = Lane("forward", slots=4, queued=0), [0], [0]
    lock, barrier = threading.Lock(), threading.Barrier(6)

    def forward():
        barrier.wait()
        try:
            with turns.turn(Visitor("A", "10.0.0.1")):
                with lock:
                    running[0] += 1
                    most[0] = max(most[0], running[0])
                threading.Event().wait(0.05)
                with lock:
                    running[0] -= 1
                return "ran"
        except BudgetError:
            return "refused"

    with ThreadPoolExecutor(6) as ex:
        outcomes = list(ex.map(lambda _: forward(), range(6)))
    assert most[0] == 1 and outcomes.count("ran") >= 1 and "refused" in outcomes
