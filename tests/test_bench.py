"""Spec of bench/: every bench is a module of the `bench` package, run as `python -m bench.<name>` (no
sys.path edits), and every block of figures README.md or a page of docs/ marks is the table its bench prints,
so a re-run's printed block replaces the page's verbatim (`bench.blocks`). Nothing here runs a bench."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bench import common
from bench.blocks import BLOCK, doc_blocks, doc_pages, refresh_blocks

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("attention", "bench")
BENCHES = sorted(p.stem for p in (ROOT / "bench").glob("bench_*.py"))
# what `python -m bench.NAME` may name: the benches and the other modules of bench/ run as scripts (bench.blocks)
RUNNABLE = sorted(
    {*BENCHES} | {p.stem for p in (ROOT / "bench").glob("*.py") if '__name__ == "__main__"' in p.read_text()}
)
# the blocks README.md held before its reference moved to docs/: each must still be in some page
MOVED = {
    ("bench_formats", "formats"),
    ("bench_relevance", "memory"),
    ("bench_abuse", "attacks"),
    ("bench_extract_many", "rates"),
    ("bench_video", "speed"),
    ("bench_video", "memory"),
}

# (bench, table): the bench's table function called on a tiny made-up result
FAKES: dict[tuple[str, str], Callable] = {
    ("bench_relevance", "memory"): lambda m: m.memory_table(
        [m.Memory(224, 197, 3.0, 38.0, 49.0), m.Memory(1024, 4097, 79.0, 793.0, 19620.0, (4250.0, 7324.0))]
    ),
    ("bench_video", "speed"): lambda m: m.speed_table(8, 8, {"batched": 0.2, "one": 0.1, "DINO loop": 0.05}),
    ("bench_video", "memory"): lambda m: m.memory_table(
        [m.Frame(360, 640, 71.0, 640.0), m.Frame(480, 848, 121.0, 1926.0), m.Frame(720, 1280, 264.0, None)], 2.1
    ),
    ("bench_formats", "formats"): lambda m: m.formats_table([m.Row("photo", "PNG", 1000, 1.0, 0.01, 0, 0.0)]),
    ("bench_client_floor", "floor"): lambda m: m.floor_table([("/echo(hello)", 0.0, 0.08)]),
    ("bench_api", "endpoints"): lambda m: m.endpoints_table([("/calculate", 0, 1139, 0.003, 0.1, 0.06, 0.06)]),
    ("bench_concurrency", "isolation"): lambda m: m.isolation_table({"lock": 1.0, "per-call x2": 1.02}, 0),
    ("bench_state", "flood"): lambda m: m.flood_table(
        [(256, 64, dict(pass_mb=14.8, store_mb=64, a_mb=60, before_mb=700, peak_mb=790, after_mb=778, b_kept=True))]
    ),
    ("bench_extract_many", "rates"): lambda m: m.rates_table({"per-image": 0.25, "extract b64": 2.3, "limit b64": 2.4}),
    ("bench_browser", "interactions"): lambda m: m.interactions_table({"patch click": (0.05, 0.25, 235e3, 0.07)}, 0.43),
    ("bench_app_roundtrip", "trip"): lambda m: m.trip_table({"bare": 1.0, "trip": 1.3}),
    ("bench_abuse", "attacks"): lambda m: m.attacks_table(
        [m.Attack("big_session", 300, {400: 150, 413: 150}, 2.3, 7, 0, 1000.0, 1100.0, 1011.0)], "on", 60
    ),
    ("bench_abuse_views", "heavy"): lambda m: m.views_table(
        [m.bench_abuse.Attack("rollout_2", 6, {"done": 3}, 1.4, 9, 0, 1000.0, 1020.0, 990.0, "relevance 0.3 s")],
        "on",
        60,
    ),
    ("bench_abuse", "heavy"): lambda m: m.attacks_table(
        [m.Attack("video_slot", 12, {"done": 3}, 1.4, 9, 0, 1000.0, 1020.0, 990.0, "relevance 0.3 s (goal 1.0 s)")],
        "on",
        60,
        heavy=True,
    ),
}


def cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


@pytest.mark.subprocess
def test_every_bench_imports_as_a_module_of_the_package():
    """In a fresh interpreter (bench_load sets its environment at import): a broken import fails here."""
    code = "import importlib, sys\nfor n in sys.argv[1:]:\n    importlib.import_module('bench.' + n)"
    r = subprocess.run([sys.executable, "-c", code, *BENCHES], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(BENCHES) >= 19


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # its parent is a module, not a package
        return False


def test_every_name_a_bench_imports_from_the_package_exists():
    """Benches import most of what they use inside functions (so `--help` stays fast): those imports run
    only when the bench does. Each `from attention... import NAME` / `from bench... import NAME` anywhere
    in a bench must name something that exists (a module moved by a refactor fails here, not mid-bench)."""
    missing = []
    for path in sorted((ROOT / "bench").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(PACKAGES):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    name = f"{node.module}.{alias.name}"
                    if not hasattr(module, alias.name) and not _is_module(name):
                        missing.append(f"{path.name}:{node.lineno} {node.module}.{alias.name}")
    assert not missing, missing


@pytest.mark.parametrize("path", sorted((ROOT / "bench").glob("*.py")), ids=lambda p: p.name)
def test_no_bench_edits_sys_path(path):
    assert "sys.path" not in path.read_text()


def test_every_bench_command_in_the_docs_names_a_bench():
    code = [p for d in ("attention", "bench", "tests") for p in (ROOT / d).rglob("*.py") if p != Path(__file__)]
    docs = {str(p.relative_to(ROOT)): p.read_text() for p in [*doc_pages(), *code]}
    assert "README.md" in docs and "docs/bench.md" in docs
    for where, text in docs.items():
        assert "python bench/" not in text, where
        for name in re.findall(r"python -m bench\.(\w+)", text):
            assert name in RUNNABLE, f"{where}: python -m bench.{name}"


def test_every_table_a_bench_prints_has_a_fake_here_and_is_well_formed():
    printed = {
        (bench, table)
        for bench in BENCHES
        for table in re.findall(rf'readme_block\(\s*"{bench}",\s*"(\w+)"', (ROOT / "bench" / f"{bench}.py").read_text())
    }
    assert printed == set(FAKES)
    environ = dict(os.environ)
    for (bench, table), fake in FAKES.items():
        lines = fake(importlib.import_module(f"bench.{bench}")).splitlines()
        width = len(cells(lines[0]))
        assert cells(lines[1]) == ["---"] * width and all(len(cells(line)) == width for line in lines), (bench, table)
    assert dict(os.environ) == environ  # importing a bench (bench_load's offline switch included) changes nothing


def test_the_blocks_of_every_page_are_the_tables_their_benches_print():
    blocks = doc_blocks()
    assert {(b.bench, b.table) for b in blocks} <= set(FAKES)  # each marked block has its bench's table function
    assert MOVED <= {(b.bench, b.table) for b in blocks}  # none dropped from the pages
    for page in doc_pages():
        text = page.read_text()
        opened, closed = (re.findall(rf"^{m}", text, re.M) for m in ("<!-- bench:", "<!-- /bench -->$"))
        assert len(opened) == len(closed) == len(BLOCK.findall(text)), page  # no marker outside a block
    for b in blocks:
        where = f"{b.page.relative_to(ROOT)}: {b.bench} {b.table}"
        assert b.command.startswith(f"python -m bench.{b.bench}") and b.bench in BENCHES, where
        printed = FAKES[b.bench, b.table](importlib.import_module(f"bench.{b.bench}")).splitlines()
        lines = b.body.splitlines()
        assert lines[:2] == printed[:2], f"{where}: the page's header is not what the bench prints"
        width = len(cells(printed[0]))
        assert len(lines) > 2 and all(len(cells(line)) == width for line in lines), f"{where}: ragged rows"


def test_a_printed_block_replaces_the_one_its_page_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_video.py"])
    old = common.readme_block("bench_video", "speed", "| a | b |\n| --- | --- |\n| 1 | 2 |")
    other = old.replace("python -m bench.bench_video", "python -m bench.bench_video --only x")
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# front\n")
    (tmp_path / "docs" / "video.md").write_text(f"before\n\n{old}\n\nafter\n")
    (tmp_path / "docs" / "other.md").write_text(f"{other}\n")
    new = old.replace("| 1 | 2 |", "| 3 | 4 |")
    assert refresh_blocks(f"some lines\n{new}\nmore\n", tmp_path) == [tmp_path / "docs" / "video.md"]
    assert (tmp_path / "docs" / "video.md").read_text() == f"before\n\n{new}\n\nafter\n"
    assert (tmp_path / "docs" / "other.md").read_text() == f"{other}\n"  # the other run's block is left alone
    with pytest.raises(LookupError):
        refresh_blocks(new.replace("bench_video speed", "bench_video memory"), tmp_path)  # no page holds it


def test_the_block_a_bench_prints_is_what_the_pages_test_reads(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_video.py", "--quick"])
    table = common.markdown_table(["", "a|b"], [[1, "x"]])
    assert table.splitlines() == ["| | a\\|b |", "| --- | --- |", "| 1 | x |"]
    found = BLOCK.fullmatch(common.readme_block("bench_video", "speed", table))
    assert found is not None
    assert found.groups() == ("bench_video", "speed", "python -m bench.bench_video --quick", "bench_video", table)


def test_an_attack_with_no_honest_call_reads_not_measured_never_pass_or_fail():
    m = importlib.import_module("bench.bench_abuse")
    assert (m.verdict(True), m.verdict(False)) == ("PASS", "FAIL")
    assert m.verdict(None).startswith("NOT MEASURED") and "PASS" not in m.verdict(None)
    row = m.Attack("mcp_clients", 8, {"ok": 8, "sent": 8}, float("nan"), 0, 0, 1000.0, 1078.0, 1039.0)
    last = m.attacks_table([row], "on", 60).splitlines()[-1]
    assert cells(last)[2] == "not measured" and "nan" not in last
    assert "mcp_clients" in m.REPEATABLE  # its 8 calls are sent again until the visitor made enough calls


def test_each_heavy_attacks_one_job_is_the_longest_kind_it_sends_timed_quiet(monkeypatch):
    m = importlib.import_module("bench.abuse_heavy")
    assert set(m.JOBS) == m.HEAVY_TIMED and {k for kinds in m.JOBS.values() for k in kinds} == set(m.JOB_KINDS)
    assert set(m.JOBS["mixed_sessions"]) == {"video at 30 fps", "relevance at 128 px"}  # both heavy kinds it sends
    quiet = {"video at 30 fps": 0.66, "relevance at 256 px": 4.97, "relevance at 128 px": 0.9}
    monkeypatch.setattr(m, "QUIET", quiet)
    assert m.one_job("mixed_sessions") == ("relevance at 128 px", 0.9)
    assert m.one_job("video_slot") == ("video at 30 fps", 0.66)
    assert m.one_job("relevance_flood") == ("relevance at 256 px", 4.97)
