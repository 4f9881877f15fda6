"""Load test and soak of the served app (`python app.py` in its own process, loopback only).

    python -m bench.bench_load [--clients 16] [--calls 10] [--sessions 300] [--max-seconds 900]
                               [--skip-load] [--skip-soak]

The app runs offline (HF_HUB_OFFLINE=1, an empty HF_HOME: the shipped mnist_vit), with fresh
GRADIO_TEMP_DIR and TMPDIR folders whose growth is measured, as is its RSS (/proc VmRSS).
Load: gradio_client calls to /attention_maps, /retrieval_hard, /retrieval_soft, /calculate and
/patch_attention, inputs varied per client and call: one client alone (the baseline), then
--clients clients at once, one thread each, --calls calls each. Every answer is then checked
against the `attention` package's own result for the same input, computed here. Reported:
errors, wrong answers, p50/p95 latency per endpoint (1 vs N clients), p95(N)/p95(1) for
/attention_maps (target <= 16). Soak: --sessions new browser sessions (4 at a time), each with a
distinct image (a digit plus seeded noise), driven over raw HTTP as the page does (upload,
queue/join, the queue/data stream): the ViT tab's image.upload event (a forward pass kept for the
visitor), then layer.release and, in every other session, qrow.submit, whose .npz downloads are
checked too. No session opens Gradio's heartbeat, so the server keeps every session's state (the
worst case). RSS every 25 sessions; target: RSS at the end within 150 MB of RSS after 50.
Everything stops at --max-seconds and reports what it has. Exit code 0 unless the bench itself
breaks: read the PASS/FAIL lines.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
from PIL import Image

from bench import common
from bench.common import Server, app_env
from bench.expected import check, check_maps, pixels
from bench.page import Browser

TEMP: list[str] = []  # the run's folders (hf, client, app-hf, gradio, tmp, images), made by go_offline
DIGITS = [str(d) for d in common.DIGITS]
VIEWS = ["heads", "mean", "rollout", "masks"]
MIX = [
    "/attention_maps",
    "/retrieval_hard",
    "/attention_maps",
    "/calculate",
    "/attention_maps",
    "/retrieval_soft",
    "/attention_maps",
    "/patch_attention",
]
DEADLINE = float("inf")


def go_offline() -> None:
    """Makes the run's folders, and runs this process (the references, gradio_client's downloads)
    offline on the shipped model, as the app runs."""
    names = ("hf", "client", "app-hf", "gradio", "tmp", "images")
    TEMP[:] = [tempfile.mkdtemp(prefix=f"bench-load-{n}-") for n in names]
    os.environ.update(
        HF_HUB_OFFLINE="1", HF_HOME=TEMP[0], GRADIO_TEMP_DIR=TEMP[1], GRADIO_ANALYTICS_ENABLED="False", MPLBACKEND="Agg"
    )


def left() -> float:
    return DEADLINE - time.time()


# ----- the server ----------------------------------------------------------------------------
def start_app(timeout: float = 120) -> Server:
    """`python app.py` on a free loopback port, once /gradio_api/info answers; its output in `.log`."""
    # clients are told apart by X-Forwarded-For, as the proxy on loopback that the app is told to trust names them
    proxies = os.environ.get("ATTENTION_TRUSTED_PROXIES", "127.0.0.1")
    env = app_env(
        HF_HOME=TEMP[2], GRADIO_TEMP_DIR=TEMP[3], TMPDIR=TEMP[4], MPLBACKEND="Agg", ATTENTION_TRUSTED_PROXIES=proxies
    )
    log = Path(tempfile.mkstemp(prefix="bench-load-app-", suffix=".log")[1])
    try:
        return common.start_app(env, timeout=timeout, path="gradio_api/info", log=log)
    except SystemExit:
        for d in TEMP:
            shutil.rmtree(d, ignore_errors=True)
        raise


def rss_mb(app: Server) -> float:
    return common.rss_mb(app.proc.pid)


def usage(path: str) -> tuple[float, int]:
    """(MB, file count) of everything under `path`."""
    sizes = []
    for d, _, files in os.walk(path):
        for f in files:
            try:
                sizes.append(os.path.getsize(os.path.join(d, f)))
            except OSError:  # deleted meanwhile (Gradio's cache sweep)
                pass
    return sum(sizes) / 1e6, len(sizes)


def snapshot(app: Server) -> str:
    (gm, gn), (tm, tn) = usage(app.env["GRADIO_TEMP_DIR"]), usage(app.env["TMPDIR"])
    return f"RSS {rss_mb(app):.0f} MB, GRADIO_TEMP_DIR {gm:.1f} MB / {gn} files, TMPDIR {tm:.1f} MB / {tn} files"


# ----- load: what each call sends, and what the package says it must answer ------------------
def matrix(g: np.random.Generator, rows: int, cols: int) -> str:
    return "; ".join(" ".join(f"{x:.2f}" for x in row) for row in g.normal(size=(rows, cols)))


def params(endpoint: str, rng: random.Random) -> dict:
    n, seed = rng.choice([50, 100, 300]), rng.choice([0, 7, 42])
    if endpoint == "/attention_maps":
        return dict(
            digit=rng.randrange(10),
            layer=rng.choice([-1, 0, 1, 2, 3]),
            view=rng.choice(VIEWS),
            threshold=rng.choice([0.3, 0.5, 0.6, 0.9]),
            query=None if rng.random() < 0.3 else (rng.randrange(7), rng.randrange(7)),
        )
    if endpoint == "/retrieval_hard":
        return dict(n=n, seed=seed, index=rng.randrange(n), shuffle_seed=rng.randrange(1000))
    if endpoint == "/retrieval_soft":
        return dict(
            n=n,
            seed=seed,
            d=rng.choice([4, 16, 64]),
            key_seed=rng.randrange(1000),
            scale=rng.choice([0.0, 1.0, 5.0, 20.0]),
        )
    if endpoint == "/calculate":
        h, g = rng.choice([1, 2]), np.random.default_rng(rng.randrange(10**6))
        n, m, d, dv = rng.randint(1, 6), rng.randint(1, 6), h * rng.randint(1, 3), h * rng.randint(1, 3)
        return dict(
            Q=matrix(g, n, d), K=matrix(g, m, d), V=matrix(g, m, dv), heads=h, mask_mode=rng.choice(["none", "causal"])
        )
    patch = rng.choice([28, 32, 56])  # a 28 px digit is worked on at 224 px
    return dict(
        digit=rng.randrange(10),
        patch=patch,
        heads=rng.randint(1, 4),
        seed=rng.randrange(100),
        index=rng.randrange((224 // patch) ** 2),
    )


def plan(client: int, calls: int) -> list[tuple[str, dict]]:
    rng = random.Random(client)
    return [(e, params(e, rng)) for e in (MIX[(client + j) % len(MIX)] for j in range(calls))]


def call(client, endpoint: str, p: dict):
    from gradio_client import handle_file

    if endpoint == "/attention_maps":
        qr, qc = p["query"] or (None, None)
        return client.predict(
            handle_file(DIGITS[p["digit"]]),
            model="mnist_vit",
            layer=p["layer"],
            resolution="auto",
            view=p["view"],
            threshold=p["threshold"],
            query_row=qr,
            query_col=qc,
            api_name=endpoint,
        )
    if endpoint == "/patch_attention":
        return client.predict(handle_file(DIGITS[p["digit"]]), *list(p.values())[1:], api_name=endpoint)
    if endpoint == "/calculate":
        return client.predict(p["Q"], p["K"], p["V"], heads=p["heads"], mask_mode=p["mask_mode"], api_name=endpoint)
    return client.predict(*p.values(), api_name=endpoint)


def run_client(
    url: str, idx: int, calls: list[tuple[str, dict]], barrier: threading.Barrier | None = None
) -> list[dict]:
    """One client's calls in order: [{client, endpoint, params, seconds, out | error}]."""
    from gradio_client import Client

    client, why, records = None, "", []
    try:
        client = Client(url, verbose=False)
    except Exception as e:  # noqa: BLE001 - then every call of this client is an error
        why = f"Client(): {type(e).__name__}: {e}"
    if barrier is not None:
        barrier.wait()
    for endpoint, p in calls:
        if left() <= 0:
            break
        r, t = dict(client=idx, endpoint=endpoint, params=p), time.perf_counter()
        try:
            if client is None:
                raise RuntimeError(why)
            r["out"] = call(client, endpoint, p)
        except Exception as e:  # noqa: BLE001 - every failure is a result here
            r["error"] = f"{type(e).__name__}: {str(e).strip()[:300]}"
        r["seconds"] = time.perf_counter() - t
        records.append(r)
    return records


def tally(name: str, records: list[dict]) -> tuple[int, int, dict, list[str]]:
    """Check every answer; (errors, wrong answers, {endpoint: (p50, p95, n)}, lines naming failures)."""
    times: dict[str, list[float]] = {}
    for r in records:
        if "out" in r:
            times.setdefault(r["endpoint"], []).append(r["seconds"])
            try:
                r["wrong"] = check(r["endpoint"], r["params"], r["out"])
            except Exception as e:  # noqa: BLE001 - an answer that cannot be read is a wrong answer
                r["wrong"] = f"unreadable answer: {type(e).__name__}: {e}"
    bad = [r for r in records if "error" in r or r.get("wrong")]
    lines = [
        f"  !! {name} client {r['client']} {r['endpoint']} {json.dumps(r['params'])[:160]}: "
        f"{r.get('error') or 'WRONG: ' + r['wrong']}"
        for r in bad[:12]
    ]
    lat = {e: (np.percentile(v, 50), np.percentile(v, 95), len(v)) for e, v in times.items()}
    return sum("error" in r for r in records), sum(bool(r.get("wrong")) for r in records), lat, lines


def load_test(app, clients: int, calls: int) -> tuple[list[str], list[tuple[str, bool]]]:
    for e in dict.fromkeys(MIX):  # warm-up, untimed and unchecked: model load, first-call costs
        for r in run_client(app.url, -1, plan(MIX.index(e), 1)):
            print(f"  warm-up {e}: {r.get('error', 'ok')} in {r['seconds']:.1f} s", flush=True)
    before = snapshot(app)
    base = run_client(app.url, 0, plan(0, max(calls, 4 * len(MIX))))  # 16+ /attention_maps samples for its p95
    print(f"baseline: 1 client, {len(base)} calls; {before}", flush=True)
    barrier, t = threading.Barrier(clients), time.time()
    with ThreadPoolExecutor(clients) as pool:
        load = [
            r for rs in pool.map(lambda i: run_client(app.url, i, plan(i, calls), barrier), range(clients)) for r in rs
        ]
    wall, after = time.time() - t, snapshot(app)
    print(f"load: {clients} clients, {len(load)} calls in {wall:.0f} s; {after}; checking answers...", flush=True)
    (be, bw, l1, bad1), (le, lw, ln, badn) = tally("baseline", base), tally("load", load)
    lines = [
        f"load: {clients} clients x {calls} calls = {len(load)} calls in {wall:.1f} s ({len(load) / wall:.1f}/s); "
        f"baseline: 1 client, {len(base)} calls",
        f"  errors {le} (baseline {be}), wrong answers {lw} (baseline {bw})",
        *bad1,
        *badn,
        f"  {'endpoint':<18}{'1 client p50 / p95 (n)':>26}{f'{clients} clients p50 / p95 (n)':>32}",
    ]
    nan = (np.nan, np.nan, 0)
    for e in sorted(set(l1) | set(ln)):
        a, b = l1.get(e, nan), ln.get(e, nan)
        lines.append(f"  {e:<18}{a[0]:>11.2f} / {a[1]:.2f} s ({a[2]:>3}){b[0]:>15.2f} / {b[1]:.2f} s ({b[2]:>3})")
    ratio = ln.get("/attention_maps", nan)[1] / l1.get("/attention_maps", nan)[1]
    lines += [
        f"  p95 ratio /attention_maps, {clients} clients vs 1: {ratio:.1f}",
        f"  before load: {before}",
        f"  after load:  {after}",
    ]
    return lines, [
        ("load: 0 errors", le + be == 0),
        ("load: 0 wrong answers", lw + bw == 0),
        ("load: /attention_maps p95 ratio <= 16", bool(ratio <= 16)),
        ("load: every planned call made", len(load) == clients * calls),
    ]


# ----- soak: browser sessions over raw HTTP --------------------------------------------------
def browse(b: Browser, i: int) -> str | None:
    """Visitor i: upload (a forward pass), a patch query at some layer, then (odd i) another query.
    Raises on an error; returns what is wrong with an answer, or None."""
    rng, session = random.Random(i), uuid.uuid4().hex[:11]
    a = pixels(DIGITS[i % 10], "L").astype(int) + np.random.default_rng(i).integers(-40, 41, size=(28, 28))
    path = os.path.join(TEMP[5], f"session_{i:04d}.png")  # distinct content: a new pass on the server
    Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(path)
    image = b.upload(path)
    out = b.event(session, "vit-image", "upload", {"vit-image": image})
    if not (out["vit-details"] and out["vit-gallery"] and out["vit-layer"].get("value") == 3):
        return f"upload: empty outputs, or layer {out['vit-layer']} is not the last (3)"
    for elem, event in [("vit-layer", "release")] + ([("vit-qrow", "submit")] if i % 2 else []):
        q, layer, view = (rng.randrange(7), rng.randrange(7)), rng.randrange(4), rng.choice(VIEWS)
        values = {"vit-image": image, "vit-layer": layer, "vit-qrow": q[0], "vit-qcol": q[1], "vit-view": view}
        out = b.event(session, elem, event, values)
        if not (out["vit-gallery"] and out["vit-query-image"]):
            return f"{elem}.{event}: empty outputs"
        out = b.event(session, "vit-download-btn", "click", values)  # the download of the view on screen
        npz = np.load(io.BytesIO(b.http.get(out["vit-download"]["value"]["url"]).raise_for_status().content))
        if wrong := check_maps(npz, path, q, layer, view):
            return f"{elem}.{event}, layer {layer}, query {q}, view {view}: {wrong}"
    return None


def soak(app, sessions: int, threads: int = 4) -> tuple[list[str], list[tuple[str, bool]]]:
    config = httpx.get(app.url + "config", timeout=30).json()
    if wrong := browse(Browser(app.url, config), sessions):  # the protocol works before looping
        return [f"soak: the first session's answer is WRONG: {wrong}"], [("soak: ran", False)]
    local, lock = threading.local(), threading.Lock()
    done, failures, rows = [0], [], [(0, rss_mb(app), *usage(app.env["GRADIO_TEMP_DIR"]))]

    def visit(i: int) -> None:
        if left() <= 0:
            return
        local.b = getattr(local, "b", None) or Browser(app.url, config)
        # each session a visitor of its own, as a proxy names them: the guard bounds new sessions per client
        local.b.http.headers["X-Forwarded-For"] = f"10.88.{i // 250}.{i % 250}"
        try:
            wrong, kind = browse(local.b, i), "wrong"
        except Exception as e:  # noqa: BLE001 - every failure is a result here
            wrong, kind = f"{type(e).__name__}: {str(e)[:300]}", "error"
        with lock:
            done[0] += 1
            if wrong:
                failures.append(f"  !! session {i} {kind}: {wrong}")
            if done[0] % 25 == 0:
                rows.append((done[0], rss_mb(app), *usage(app.env["GRADIO_TEMP_DIR"])))

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(visit, range(sessions)))
    if rows[-1][0] != done[0]:
        rows.append((done[0], rss_mb(app), *usage(app.env["GRADIO_TEMP_DIR"])))
    errors = sum(" error: " in f for f in failures)
    at50, (n_end, rss_end, *_) = next((r for n, r, *_ in rows if n >= 50), np.nan), rows[-1]
    delta = rss_end - at50
    lines = [
        f"soak: {done[0]} of {sessions} browser sessions, errors {errors}, wrong answers {len(failures) - errors}",
        *failures[:12],
        "  sessions   RSS MB   GRADIO_TEMP_DIR MB (files)",
        *[f"  {n:>8} {r:>8.0f} {m:>10.1f} ({c})" for n, r, m, c in rows],
        f"  RSS@50 {at50:.0f} MB, RSS@{n_end} {rss_end:.0f} MB, delta {delta:+.0f} MB "
        f"({delta / max(n_end - 50, 1):.2f} MB per session after the 50th)",
        f"  after soak: {snapshot(app)}",
    ]
    return lines, [
        ("soak: 0 errors, 0 wrong answers", not failures),
        ("soak: RSS delta (50 -> end) <= 150 MB", bool(delta <= 150)),
        ("soak: every session run", done[0] == sessions),
    ]


# ----- main ----------------------------------------------------------------------------------
def main() -> None:
    global DEADLINE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--calls", type=int, default=10, help="calls per client")
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--max-seconds", type=float, default=900, help="stop and report after this long")
    ap.add_argument("--skip-load", action="store_true")
    ap.add_argument("--skip-soak", action="store_true")
    args = ap.parse_args()
    go_offline()
    t0 = time.time()
    DEADLINE = t0 + args.max_seconds
    lines, verdicts = [], []
    app = start_app()
    print(f"app: {app.url} pid {app.proc.pid}, up in {time.time() - t0:.0f} s; {snapshot(app)}", flush=True)
    try:
        if not args.skip_load:
            more, ok = load_test(app, args.clients, args.calls)
            lines, verdicts = lines + more, verdicts + ok
        if not args.skip_soak and left() > 0:
            more, ok = soak(app, args.sessions)
            lines, verdicts = lines + more, verdicts + ok
    finally:
        code = app.proc.poll()
        app.proc.kill()
        app.proc.wait(timeout=30)
        tail = app.log.read_text(errors="replace")[-2000:]
        app.log.unlink()
        for d in TEMP:
            shutil.rmtree(d, ignore_errors=True)
    print(
        f"\n===== SUMMARY: python -m bench.bench_load, {time.time() - t0:.0f} s"
        f"{', STOPPED at --max-seconds' if left() <= 0 else ''} ====="
    )
    print("app: alive to the end" if code is None else f"app: EXITED with code {code} during the bench:\n{tail}")
    print("\n".join(lines))
    for name, ok in verdicts:
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    print(f"OVERALL: {'PASS' if verdicts and all(ok for _, ok in verdicts) and code is None else 'FAIL'}")


if __name__ == "__main__":
    main()
