"""Many visitors at once: one shared model, many threads, each call gets exactly its own result;
the server's shared store of passes computes each pass once and stays within its bytes; eight
app clients at once each get their own maps."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from gradio_client import handle_file

from attention.crowd.cache import SharedCache
from attention.vit.engine.extract import attention_maps
from attention.vit.models.loader import load_vit
from attention.vit.serve import passes

ROOT = Path(__file__).resolve().parents[3]
DIGITS = [str(ROOT / "examples" / "digits" / f"digit_{i}.png") for i in range(10)]


def _together(fns, rounds: int = 3):
    """Run every fn in its own thread, all released at once by a barrier, `rounds` times; results per fn."""
    barrier = threading.Barrier(len(fns))

    def go(fn):
        out = []
        for _ in range(rounds):
            barrier.wait()
            out.append(fn())
        return out

    with ThreadPoolExecutor(len(fns)) as ex:
        return [f.result() for f in [ex.submit(go, fn) for fn in fns]]


def test_one_shared_model_from_four_threads_returns_each_calls_solo_result():
    model = load_vit("mnist_vit", device="cpu")
    # different images, queries, resolutions (so token counts differ: rows of another pass cannot stack)
    calls = [
        dict(image=DIGITS[0], query="cls", resolution="auto", keep_qk=True),
        dict(image=DIGITS[1], query=(2, 3), resolution=56, keep_qk=False),
        dict(image=DIGITS[2], query=(10, 1), resolution=84, keep_qk=True),
        dict(image=DIGITS[7], query=(0, 0), resolution=112, keep_qk=False),
    ]
    solo = [attention_maps(model, **c) for c in calls]
    results = _together([lambda c=c: attention_maps(model, **c) for c in calls], rounds=4)
    for c, ref, runs in zip(calls, solo, results):
        for r in runs:
            assert r.grid == ref.grid and r.query == ref.query
            assert r.scores.shape == ref.scores.shape == (4, 4, ref.scores.shape[-1])  # 4 layers, never more
            np.testing.assert_array_equal(r.scores, ref.scores)
            if c["keep_qk"]:
                assert len(r.qk) == 4
                for (q, k), (q0, k0) in zip(r.qk, ref.qk):
                    np.testing.assert_array_equal(q.numpy(), q0.numpy())
                    np.testing.assert_array_equal(k.numpy(), k0.numpy())


def test_kept_q_and_k_are_compact_copies_not_views_of_the_qkv_buffer():
    res = attention_maps(load_vit("mnist_vit", device="cpu"), DIGITS[3], keep_qk=True)
    for q, k in res.qk:
        assert q.is_contiguous() and k.is_contiguous()
        assert q.untyped_storage().nbytes() == q.nbytes and k.untyped_storage().nbytes() == k.nbytes


class Blob:
    def __init__(self, nbytes: int, tag: str = ""):
        self.nbytes, self.tag = nbytes, tag


def test_the_shared_cache_computes_a_key_once_however_many_ask_at_once():
    cache: SharedCache[Blob] = SharedCache(max_bytes=1000, ttl=60)
    started = threading.Event()

    def compute():
        started.set()
        threading.Event().wait(0.2)  # slow, so the other threads arrive meanwhile
        return Blob(10, "x")

    results = _together([lambda: cache.get_or_run("k", compute) for _ in range(8)], rounds=1)
    assert cache.computed == 1 and len({id(r[0]) for r in results}) == 1


def test_the_shared_cache_stays_within_its_bytes_least_recently_used_out_first():
    cache: SharedCache[Blob] = SharedCache(max_bytes=100, ttl=60)
    for k in "abc":
        cache.put(k, Blob(30))
    assert cache.nbytes == 90 and cache.get("a") is not None  # a is now the most recent
    cache.put("d", Blob(30))  # evicts b, the least recently used
    assert cache.get("b") is None and cache.get("a") is not None and cache.nbytes == 90
    cache.put("huge", Blob(500))  # larger than the whole budget: not kept, nothing evicted for it
    assert cache.get("huge") is None and cache.nbytes == 90


def test_the_shared_cache_forgets_what_was_not_used_for_its_time_to_live():
    now = [0.0]
    cache: SharedCache[Blob] = SharedCache(max_bytes=100, ttl=10, clock=lambda: now[0])
    cache.put("a", Blob(10))
    cache.put("b", Blob(10))
    now[0] = 8
    assert cache.get("a") is not None  # used at 8: lives until 18
    now[0] = 12
    assert cache.get("b") is None and cache.get("a") is not None and cache.nbytes == 10


def test_an_error_reaches_every_waiting_caller_and_is_not_kept():
    cache: SharedCache[Blob] = SharedCache(max_bytes=100, ttl=60)

    def fail():
        threading.Event().wait(0.1)
        raise ValueError("bad input")

    results = _together([lambda: _catch(lambda: cache.get_or_run("k", fail)) for _ in range(4)], rounds=1)
    assert all(isinstance(r[0], ValueError) for r in results)
    assert cache.get_or_run("k", lambda: Blob(1)).nbytes == 1  # the next caller computes afresh


def _catch(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        return e


def test_a_visitor_keeps_only_a_ref_and_a_dropped_pass_is_recomputed(monkeypatch):
    store: SharedCache = SharedCache(max_bytes=1 << 30, ttl=60)
    p = passes.get_pass(DIGITS[4], "mnist_vit", "auto", cache=store)
    ref = p.ref
    assert ref.key == p.key and ref.grid == (7, 7) and (ref.num_layers, ref.num_heads) == (4, 4)
    assert passes.get_pass(DIGITS[4], "mnist_vit", "auto", cache=store) is p  # kept: no new forward
    assert store.nbytes == p.nbytes >= sum(q.nbytes + k.nbytes for q, k in p.base.qk)
    store.clear()
    again = passes.get_pass(DIGITS[4], "mnist_vit", "auto", cache=store)
    assert again is not p and np.array_equal(again.base.scores, p.base.scores)


def test_passes_of_many_visitors_stay_within_the_store_budget():
    one = passes.get_pass(DIGITS[0], "mnist_vit", 56).nbytes
    store: SharedCache = SharedCache(max_bytes=3 * one + one // 2, ttl=60)
    for d in DIGITS:  # ten visitors, ten images
        passes.get_pass(d, "mnist_vit", 56, cache=store)
    assert len(store) == 3 and store.nbytes <= store.max_bytes


@pytest.fixture(scope="module")
def solo_maps():
    """The package's own maps for each client's (digit, query)."""
    out = {}
    for i in range(8):
        q = "cls" if i % 3 == 0 else (i % 7, (2 * i) % 7)
        p = passes.get_pass(DIGITS[i], "mnist_vit", "auto")
        out[i] = (q, p.at(q, -1).maps)
    return out


def test_eight_app_clients_at_once_each_get_their_own_maps(visitor_client, solo_maps):
    clients = [visitor_client(100 + i) for i in range(8)]  # eight visitors (one client is one visitor)

    def call(i):
        q, _ = solo_maps[i]
        row, col = (None, None) if q == "cls" else q
        _, npz, info = clients[i].predict(
            handle_file(DIGITS[i]), model="mnist_vit", query_row=row, query_col=col, api_name="/attention_maps"
        )
        return np.load(npz)["maps"], info

    results = _together([lambda i=i: call(i) for i in range(8)], rounds=2)
    for i, runs in enumerate(results):
        for maps, _info in runs:
            np.testing.assert_allclose(maps, solo_maps[i][1], atol=1e-6)
