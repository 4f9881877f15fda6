"""Spec of attention.crowd.cache: a visitor who stopped asking keeps only their newest value (`idle`); and the folder
sweep: Gradio's cache deletion leaves one empty folder per file it
ever served; `sweep_empty_dirs` removes those once they have been empty a while, and nothing else."""

from __future__ import annotations

import os
import time

from attention.crowd.cache import SharedCache, sweep_empty_dirs


def _age(path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_old_empty_folders_are_removed_deepest_first(tmp_path):
    for name in ("a", "b/c", "d"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "d" / "kept.png").write_bytes(b"x")
    (tmp_path / "e").mkdir()  # empty, but just emptied: an upload may be about to land there
    for name in ("a", "b/c", "b", "d"):
        _age(tmp_path / name, 120)
    assert sweep_empty_dirs(tmp_path, min_age=60) == 2  # a, b/c (b changed when c went: the next sweep)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "d", "e"]
    assert (tmp_path / "d" / "kept.png").exists()
    _age(tmp_path / "b", 120)
    assert sweep_empty_dirs(tmp_path, min_age=60) == 1 and not (tmp_path / "b").exists()
    assert tmp_path.exists() and (tmp_path / "e").exists()


def test_a_missing_root_is_nothing_to_sweep(tmp_path):
    assert sweep_empty_dirs(tmp_path / "gone") == 0


class Blob:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes


def test_a_visitor_who_stopped_asking_keeps_only_their_newest_values_within_the_idle_bytes():
    now = [0.0]
    store: SharedCache[Blob] = SharedCache(
        max_bytes=2000, ttl=600, max_owner_bytes=1000, idle=30, idle_bytes=250, clock=lambda: now[0]
    )
    for i in range(4):  # A makes four, at 0, 1, 2, 3
        now[0] = i
        store.put(f"a{i}", Blob(100), owner="A")
    store.put("b0", Blob(100), owner="B")
    store.put("b1", Blob(100), owner="B")
    store.put("b2", Blob(100), owner="B")
    store.put("c0", Blob(400), owner="C")  # over the idle bytes on its own
    store.put("c1", Blob(100), owner="C")
    assert store.get("c0") is not None  # at 3: C's most recently used is c0
    now[0] = 25
    assert store.get("b0") is not None  # B's most recently used are now b0, then b2
    now[0] = 34  # A and C unused for 31 s: A down to a3, a2 (200 of 250); C to c0, its newest (over 250)
    assert store.sweep() == 300 and store.owned("A") == 200 and store.owned("C") == 400
    assert [store.get(k) is not None for k in ("a0", "a1", "a2", "a3", "c0", "c1")] == [False] * 2 + [True] * 3 + [
        False
    ]
    assert store.owned("B") == 300  # B (25) is still active: all kept
    now[0] = 35
    store.put("a4", Blob(100), owner="A")  # active again: a new value keeps the old ones
    assert store.owned("A") == 300
    now[0] = 56  # B unused for 31 s: keeps b0 and b2, its most recently used, not b1
    assert store.sweep() == 100 and [store.get(k) is not None for k in ("b0", "b1", "b2")] == [True, False, True]
    now[0] = 56 + 601  # the time to live still ends every value
    assert store.sweep() == 900 and len(store) == 0


def test_without_an_idle_time_a_quiet_visitor_keeps_everything_until_its_time_to_live():
    now = [0.0]
    store: SharedCache[Blob] = SharedCache(max_bytes=1000, ttl=600, clock=lambda: now[0])
    for i in range(3):
        store.put(f"a{i}", Blob(100), owner="A")
    now[0] = 599
    assert store.sweep() == 0 and store.owned("A") == 300


def test_the_sessions_of_one_address_share_its_bound_and_go_idle_together():
    now = [0.0]
    store: SharedCache[Blob] = SharedCache(
        max_bytes=10_000, ttl=600, max_owner_bytes=300, max_group_bytes=500, idle=30, idle_bytes=150,
        clock=lambda: now[0],
    )  # fmt: skip
    for i in range(8):  # eight sessions of one address, 100 bytes each, one after another
        now[0] = i
        store.put(f"s{i}", Blob(100), owner=("c:10.0.0.1", f"s{i}"))
    store.put("other", Blob(100), owner=("c:10.0.0.2", "t"))
    assert store.group_owned("c:10.0.0.1") == 500  # the address's five newest; each session's share never reached
    assert [store.get(f"s{i}") is not None for i in range(8)] == [False] * 3 + [True] * 5
    assert store.owned(("c:10.0.0.1", "s7")) == 100 and store.group_owned("c:10.0.0.2") == 100
    now[0] = 20
    assert store.get("other") is not None  # the other address stays active
    now[0] = 36  # the first address used last at 7, by its newest session: not yet idle (30 s)
    assert store.sweep() == 0
    now[0] = 38  # idle: the address keeps its newest value, s7 (s6 too would pass the idle 150 bytes)
    assert store.sweep() == 400 and store.group_owned("c:10.0.0.1") == 100 and store.get("s7") is not None
    assert store.group_owned("c:10.0.0.2") == 100  # the other address, active at 20, untouched


def test_a_full_store_drops_from_the_address_holding_most_not_the_session():
    store: SharedCache[Blob] = SharedCache(max_bytes=600, ttl=600, max_owner_bytes=200)
    for i in range(4):  # four sessions of one address, 100 each: no session holds more than the lone visitor
        store.put(f"s{i}", Blob(100), owner=("c:A", f"s{i}"))
    store.put("lone", Blob(200), owner=("c:B", "lone"))
    store.put("new", Blob(100), owner=("c:B", "other"))  # full: address A (400) pays, not B's 200
    assert store.group_owned("c:A") == 300 and store.group_owned("c:B") == 300
    assert store.get("s0") is None and store.get("lone") is not None
