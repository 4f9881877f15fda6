"""Load test and soak of the served app: `python app.py` in its own process, loopback only.

    python bench/bench_load.py [--clients 16] [--calls 10] [--sessions 300] [--max-seconds 900]
                               [--skip-load] [--skip-soak]

The app starts as users run it (offline: HF_HUB_OFFLINE=1 and an empty HF_HOME, so with the shipped
`mnist_vit`; GRADIO_TEMP_DIR and TMPDIR fresh temporary folders, so their growth can be measured).
Load: one gradio_client alone (the baseline), then --clients clients at once, each in its own
thread, make --calls mixed calls each to /attention_maps, /retrieval_hard, /retrieval_soft,
/calculate and /patch_attention with inputs varied per client and call. After each phase every
answer is checked against the `attention` package's own result for the same input (computed in
this process); it counts errors (exceptions), wrong answers, p50/p95 latency per endpoint for 1 vs
N clients (target: p95(N) / p95(1) <= 16 for /attention_maps), and the server's RSS and temp dirs.
Soak: --sessions new browser sessions, each with its own distinct digit image (seeded noise),
driven over raw HTTP as the page does (upload, queue/join, the queue/data event stream): the ViT
tab's `image.upload` event (a forward pass kept for the visitor), then `layer.release` and, every
other session, `qrow.submit` on a patch query, whose .npz download is checked against the package.
The sessions never open Gradio's heartbeat, so the server keeps every session's state (the worst
case). Server RSS every 25 sessions; target: RSS after --sessions within 150 MB of RSS after 50.
Everything stops at --max-seconds and reports what it has. Exit code 0 unless the bench itself
fails: read the PASS/FAIL lines.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
HF_HOME = tempfile.mkdtemp(prefix="bench-load-hf-")  # empty: the app and the references use the shipped mnist_vit
os.environ.update(HF_HUB_OFFLINE="1", HF_HOME=HF_HOME, GRADIO_ANALYTICS_ENABLED="False", MPLBACKEND="Agg",
                  GRADIO_TEMP_DIR=tempfile.mkdtemp(prefix="bench-load-client-"))  # this process's downloads

import httpx  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

DIGITS = [str(ROOT / "examples" / "digits" / f"digit_{i}.png") for i in range(10)]
VIEWS = ["heads", "mean", "rollout", "masks"]
MIX = ["/attention_maps", "/retrieval_hard", "/attention_maps", "/calculate", "/attention_maps",
       "/retrieval_soft", "/attention_maps", "/patch_attention"]
DEADLINE = float("inf")


def left() -> float:
    return DEADLINE - time.time()


# ----- the server ----------------------------------------------------------------------------
def start_app(timeout: float = 120) -> tuple[subprocess.Popen, str, str, str]:
    """`python app.py` on a free loopback port; (process, url, its GRADIO_TEMP_DIR, its TMPDIR)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gtmp, tmp = tempfile.mkdtemp(prefix="bench-load-gradio-"), tempfile.mkdtemp(prefix="bench-load-tmp-")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": tempfile.mkdtemp(prefix="bench-load-hf-app-"),
           "GRADIO_TEMP_DIR": gtmp, "TMPDIR": tmp, "GRADIO_SERVER_PORT": str(port),
           "GRADIO_ANALYTICS_ENABLED": "False", "MPLBACKEND": "Agg"}
    url = f"http://127.0.0.1:{port}/"
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(Path(tmp) / "app.stderr", "w"))
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"app.py exited with code {proc.returncode} before serving; see {tmp}/app.stderr")
        try:
            httpx.get(url + "gradio_api/info", timeout=5).raise_for_status()
            return proc, url, gtmp, tmp
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"app.py did not answer at {url} within {timeout:.0f} s")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def usage(path: str) -> tuple[float, int]:
    """(MB, file count) of everything under `path`."""
    sizes = [os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
             if os.path.isfile(os.path.join(d, f))]
    return sum(sizes) / 1e6, len(sizes)


def snapshot(proc, gtmp: str, tmp: str) -> str:
    (gm, gn), (tm, tn) = usage(gtmp), usage(tmp)
    return f"RSS {rss_mb(proc.pid):.0f} MB; GRADIO_TEMP_DIR {gm:.1f} MB in {gn} files; TMPDIR {tm:.1f} MB in {tn} files"


# ----- load: what each call sends, and what the package says it must answer ------------------
def matrix(rng: np.random.Generator, rows: int, cols: int) -> str:
    return "; ".join(" ".join(f"{x:.2f}" for x in row) for row in rng.normal(size=(rows, cols)))


def params(endpoint: str, rng: random.Random) -> dict:
    if endpoint == "/attention_maps":
        q = None if rng.random() < 0.3 else (rng.randrange(7), rng.randrange(7))
        return dict(digit=rng.randrange(10), layer=rng.choice([-1, 0, 1, 2, 3]), view=rng.choice(VIEWS),
                    threshold=rng.choice([0.3, 0.5, 0.6, 0.9]), query=q)
    if endpoint == "/retrieval_hard":
        n = rng.choice([50, 100, 300])
        return dict(n=n, seed=rng.choice([0, 7, 42]), index=rng.randrange(n), shuffle_seed=rng.randrange(1000))
    if endpoint == "/retrieval_soft":
        return dict(n=rng.choice([50, 100, 300]), seed=rng.choice([0, 7, 42]), d=rng.choice([4, 16, 64]),
                    key_seed=rng.randrange(1000), scale=rng.choice([0.0, 1.0, 5.0, 20.0]))
    if endpoint == "/calculate":
        h, g = rng.choice([1, 2]), np.random.default_rng(rng.randrange(10**6))
        n, m, d, dv = rng.randint(1, 6), rng.randint(1, 6), h * rng.randint(1, 3), h * rng.randint(1, 3)
        return dict(Q=matrix(g, n, d), K=matrix(g, m, d), V=matrix(g, m, dv), heads=h,
                    mask_mode=rng.choice(["none", "causal"]))
    patch = rng.choice([28, 32, 56])
    return dict(digit=rng.randrange(10), patch=patch, heads=rng.randint(1, 4), seed=rng.randrange(100),
                index=rng.randrange((224 // patch) ** 2))


def plan(client: int, calls: int) -> list[tuple[str, dict]]:
    rng = random.Random(client)
    return [(e, params(e, rng)) for e in (MIX[(client + j) % len(MIX)] for j in range(calls))]


def call(client, endpoint: str, p: dict):
    from gradio_client import handle_file

    if endpoint == "/attention_maps":
        qr, qc = p["query"] or (None, None)
        return client.predict(handle_file(DIGITS[p["digit"]]), model="mnist_vit", layer=p["layer"], resolution="auto",
                              view=p["view"], threshold=p["threshold"], query_row=qr, query_col=qc, api_name=endpoint)
    if endpoint == "/patch_attention":
        return client.predict(handle_file(DIGITS[p["digit"]]), p["patch"], p["heads"], p["seed"], p["index"],
                              api_name=endpoint)
    if endpoint == "/calculate":
        return client.predict(p["Q"], p["K"], p["V"], heads=p["heads"], scale_mode="default",
                              mask_mode=p["mask_mode"], api_name=endpoint)
    return client.predict(*p.values(), api_name=endpoint)


_passes: dict[str, object] = {}
_lock = threading.Lock()


def reference_pass(path: str):
    from attention import session

    with _lock:
        if path not in _passes:
            _passes[path] = session.run(path, "mnist_vit", "auto")
        return _passes[path]


def pixels(path: str, mode: str = "RGB") -> np.ndarray:
    return np.asarray(Image.open(path).convert(mode))


def check_maps(npz: dict, path: str, query, layer: int, view: str) -> str | None:
    p = reference_pass(path)
    ref = p.at(query or "cls", layer)
    if not np.allclose(npz["maps"], ref.maps, rtol=0, atol=1e-5):
        return f"maps differ by {np.abs(npz['maps'] - ref.maps).max():.2e}"
    if view == "rollout" and not np.allclose(npz["rollout"], p.rollout(query or "cls", layer), rtol=0, atol=1e-5):
        return "rollout differs"
    if int(npz["layer"]) != ref.layer or npz["query"].tolist() != list(query or (-1, -1)):
        return f"layer/query {int(npz['layer'])}/{npz['query'].tolist()} != {ref.layer}/{query}"
    return None


def check(endpoint: str, p: dict, out) -> str | None:
    """None when the answer equals the package's own result for the same input, else what differs."""
    from attention import calculator, patches, retrieval, retrieval_views

    if endpoint == "/attention_maps":
        sheet, npz, info = out
        return check_maps(np.load(npz), DIGITS[p["digit"]], p["query"], p["layer"], p["view"]) or (
            None if info["view"] == p["view"] and Image.open(sheet).format == "PNG" else "info/sheet")
    if endpoint in ("/retrieval_hard", "/retrieval_soft"):
        db = retrieval_views.database(p["n"], p["seed"])
        img = pixels(out[-2], "L")[::8, ::8]  # the app shows the 28 x 28 digit 8x
        if endpoint == "/retrieval_hard":
            lk, info = retrieval.hard_lookup(db, p["index"], p["shuffle_seed"]), out[-1]
            ok = (info["scores"] == lk.scores[0].tolist() and info["order"] == lk.order.tolist()
                  and info["retrieved_equals_database_image"] is True and np.array_equal(img, db.images[p["index"]]))
        else:
            lk, info = retrieval.soft_lookup(db, p["d"], p["key_seed"], p["scale"]), out[-1]
            ok = np.allclose(info["weights"], lk.weights[0], rtol=1e-9, atol=0) and np.array_equal(
                img, lk.retrieved_images()[0])
        return None if ok else "scores/weights/order or retrieved image differ"
    if endpoint == "/calculate":
        Q, K, V = (np.array([[float(x) for x in row.split()] for row in p[k].split(";")]) for k in "QKV")
        s = calculator.attend(Q, K, V, heads=p["heads"], mask="causal" if p["mask_mode"] == "causal" else None)
        ok = (np.allclose(out["weights"], s.weights, rtol=1e-9, atol=1e-12)
              and np.allclose(out["output"], s.output, rtol=1e-9, atol=1e-12) and all(c["ok"] for c in out["checks"]))
        return None if ok else "weights/output differ or a torch check failed"
    pv = patches.patch_view(DIGITS[p["digit"]], p["patch"], p["heads"], p["seed"], p["index"])
    grid, maps, mats, info, index = out
    same = [np.array_equal(pixels(f), a) for f, a in ((grid, pv.grid), (maps, pv.maps), (mats, pv.matrices))]
    return None if all(same) and info == pv.info and index["value"] == pv.index else f"images equal {same}, info/index"


def run_client(url: str, idx: int, calls: list[tuple[str, dict]], barrier: threading.Barrier | None) -> list[dict]:
    """One client's calls in order: [{endpoint, params, seconds, out | error}]."""
    from gradio_client import Client

    records = []
    try:
        client = Client(url, verbose=False)
    except Exception as e:  # noqa: BLE001 - counted as an error of every call
        client, why = None, f"Client(): {type(e).__name__}: {e}"
    if barrier is not None:
        barrier.wait()
    for endpoint, p in calls:
        if left() <= 0:
            break
        r = dict(client=idx, endpoint=endpoint, params=p)
        t = time.perf_counter()
        try:
            if client is None:
                raise RuntimeError(why)
            r["out"] = call(client, endpoint, p)
        except Exception as e:  # noqa: BLE001 - every failure is a result here
            r["error"] = f"{type(e).__name__}: {str(e).strip()[:300]}"
        r["seconds"] = time.perf_counter() - t
        records.append(r)
    return records


def verify(records: list[dict]) -> None:
    for r in records:
        if "out" in r:
            try:
                r["wrong"] = check(r["endpoint"], r["params"], r["out"])
            except Exception as e:  # noqa: BLE001 - an answer that cannot be read is a wrong answer
                r["wrong"] = f"unreadable answer: {type(e).__name__}: {e}"


def latencies(records: list[dict]) -> dict[str, tuple[float, float, int]]:
    by: dict[str, list[float]] = {}
    for r in records:
        if "out" in r:
            by.setdefault(r["endpoint"], []).append(r["seconds"])
    return {e: (np.percentile(v, 50), np.percentile(v, 95), len(v)) for e, v in sorted(by.items())}


def report_failures(name: str, records: list[dict]) -> tuple[int, int]:
    errors, wrong = [r for r in records if "error" in r], [r for r in records if r.get("wrong")]
    for r in (errors + wrong)[:12]:
        print(f"  !! {name} client {r['client']} {r['endpoint']} {json.dumps(r['params'])[:200]}: "
              f"{r.get('error') or 'WRONG: ' + r['wrong']}")
    return len(errors), len(wrong)


# ----- soak: browser sessions over raw HTTP --------------------------------------------------
class Browser:
    """The ViT tab's private events as the page sends them: upload, queue/join, queue/data."""

    def __init__(self, url: str, config: dict):
        self.http = httpx.Client(base_url=url, timeout=httpx.Timeout(30, read=120))
        self.ids = {c["props"].get("elem_id"): c["id"] for c in config["components"] if c["props"].get("elem_id")}
        types = {c["id"]: c["type"] for c in config["components"]}
        values = {c["id"]: c["props"].get("value") for c in config["components"]}
        self.deps = {(c, ev): d for d in config["dependencies"] for c, ev in d["targets"]}
        self.defaults = {i: None if types[i] == "state" else values[i] for i in self.dep("vit-image", "upload")["inputs"]}

    def dep(self, elem: str, event: str) -> dict:
        return self.deps[self.ids[elem], event]

    def upload(self, path: str) -> dict:
        with open(path, "rb") as f:
            r = self.http.post("/gradio_api/upload", files=[("files", (Path(path).name, f, "image/png"))])
        r.raise_for_status()
        return {"path": r.json()[0], "orig_name": Path(path).name, "mime_type": "image/png",
                "meta": {"_type": "gradio.FileData"}}

    def event(self, session: str, elem: str, event: str, values: dict[str, object]) -> dict[str, object]:
        """Run the event bound to (elem, event) in `session`; its outputs by elem_id (or component id)."""
        d = self.dep(elem, event)
        sent = {**self.defaults, **{self.ids[k]: v for k, v in values.items()}}
        body = {"data": [sent[i] for i in d["inputs"]], "fn_index": d["id"], "trigger_id": self.ids[elem],
                "session_hash": session, "event_data": None}
        r = self.http.post("/gradio_api/queue/join", json=body)
        r.raise_for_status()
        event_id = r.json()["event_id"]
        with self.http.stream("GET", "/gradio_api/queue/data", params={"session_hash": session}) as s:
            for line in s.iter_lines():
                m = json.loads(line[5:]) if line.startswith("data:") else {}
                if m.get("msg") == "process_completed" and m.get("event_id") == event_id:
                    if not m.get("success"):
                        raise RuntimeError(f"{elem}.{event} failed: {m.get('output', {}).get('error')}")
                    names = {i: k for k, i in self.ids.items()}
                    return {names.get(i, i): v for i, v in zip(d["outputs"], m["output"]["data"])}
                if m.get("msg") in ("unexpected_error", "close_stream"):
                    raise RuntimeError(f"{elem}.{event}: stream ended: {m}")
        raise RuntimeError(f"{elem}.{event}: stream ended without process_completed")


def session_image(i: int, folder: str) -> str:
    """Digit i % 10 with seeded noise: distinct content for every session (a new forward pass each)."""
    rng = np.random.default_rng(i)
    a = pixels(DIGITS[i % 10], "L").astype(int) + rng.integers(-40, 41, size=(28, 28))
    path = os.path.join(folder, f"session_{i:04d}.png")
    Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(path)
    return path


def browse(b: Browser, i: int, folder: str) -> str | None:
    """One visitor: upload (forward pass), then a patch query at a layer, then (odd i) another query.
    Raises on errors; returns what is wrong with an answer, or None."""
    rng, path, session = random.Random(i), session_image(i, folder), uuid.uuid4().hex[:11]
    image = b.upload(path)
    out = b.event(session, "vit-image", "upload", {"vit-image": image})
    if not (out["vit-details"] and out["vit-gallery"] and out["vit-layer"].get("value") == 3):
        return f"upload: empty outputs or layer {out['vit-layer']}"
    steps = [("vit-layer", "release", rng.randrange(4))] + ([("vit-qrow", "submit", 3)] if i % 2 else [])
    for elem, event, layer in steps:
        q, view = (rng.randrange(7), rng.randrange(7)), rng.choice(VIEWS)
        out = b.event(session, elem, event, {"vit-image": image, "vit-layer": layer, "vit-qrow": q[0],
                                            "vit-qcol": q[1], "vit-view": view})
        npz = np.load(io.BytesIO(b.http.get(out["vit-download"]["url"]).raise_for_status().content))
        if wrong := check_maps(npz, path, q, layer, view):
            return f"{elem}.{event} layer {layer} query {q} view {view}: {wrong}"
    return None


def soak(url: str, proc, gtmp: str, tmp: str, sessions: int, threads: int = 4) -> dict:
    config = httpx.get(url + "config", timeout=30).json()
    folder = tempfile.mkdtemp(prefix="bench-load-images-")
    local = threading.local()
    done, samples, failures, lock = [0], [(0, rss_mb(proc.pid), *usage(gtmp))], [], threading.Lock()

    def one(i: int) -> None:
        if left() <= 0:
            return
        if not hasattr(local, "b"):
            local.b = Browser(url, config)
        try:
            wrong = browse(local.b, i, folder)
            kind = "wrong" if wrong else None
        except Exception as e:  # noqa: BLE001
            wrong, kind = f"{type(e).__name__}: {str(e)[:300]}", "error"
        with lock:
            done[0] += 1
            if kind:
                failures.append((i, kind, wrong))
            if done[0] % 25 == 0:
                samples.append((done[0], rss_mb(proc.pid), *usage(gtmp)))

    first = Browser(url, config)  # the protocol works before looping
    if wrong := browse(first, sessions, folder):
        raise SystemExit(f"soak: the first browser session's answer is wrong: {wrong}")
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(sessions)))
    if samples[-1][0] != done[0]:
        samples.append((done[0], rss_mb(proc.pid), *usage(gtmp)))
    return dict(done=done[0], samples=samples, failures=failures)


# ----- main ----------------------------------------------------------------------------------
def main() -> None:
    global DEADLINE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--calls", type=int, default=10, help="calls per client")
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--max-seconds", type=float, default=900)
    ap.add_argument("--skip-load", action="store_true")
    ap.add_argument("--skip-soak", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    DEADLINE = t0 + args.max_seconds
    summary: list[str] = []
    verdicts: list[tuple[str, bool]] = []
    proc, url, gtmp, tmp = start_app()
    print(f"app: {url} pid {proc.pid}, up in {time.time() - t0:.0f} s; {snapshot(proc, gtmp, tmp)}", flush=True)
    try:
        if not args.skip_load:
            for e in dict.fromkeys(MIX):  # warm-up, untimed: model load, first-call costs
                for r in run_client(url, -1, plan(MIX.index(e), 1), None):
                    print(f"  warm-up {e}: {r.get('error', 'ok')} in {r['seconds']:.1f} s", flush=True)
            before = snapshot(proc, gtmp, tmp)
            base = run_client(url, 0, plan(0, max(args.calls, 2 * len(MIX))), None)
            print(f"baseline: 1 client, {len(base)} calls; at {time.time() - t0:.0f} s", flush=True)
            barrier = threading.Barrier(args.clients)
            t1 = time.time()
            with ThreadPoolExecutor(args.clients) as pool:
                runs = pool.map(lambda i: run_client(url, i, plan(i, args.calls), barrier), range(args.clients))
                load = [r for rs in runs for r in rs]
            wall = time.time() - t1
            after = snapshot(proc, gtmp, tmp)
            print(f"load: {args.clients} clients, {len(load)} calls in {wall:.0f} s; checking answers...", flush=True)
            verify(base)
            verify(load)
            be, bw = report_failures("baseline", base)
            le, lw = report_failures("load", load)
            l1, ln = latencies(base), latencies(load)
            summary += [f"load: {args.clients} clients x {args.calls} calls = {len(load)} calls in {wall:.1f} s "
                        f"({len(load) / max(wall, 1e-9):.1f} calls/s); baseline 1 client x {len(base)} calls",
                        f"  errors {le} (baseline {be}), wrong answers {lw} (baseline {bw})",
                        f"  {'endpoint':<18}{'1 client p50/p95 (n)':>26}{f'{args.clients} clients p50/p95 (n)':>30}"]
            for e in sorted(set(l1) | set(ln)):
                a, b = l1.get(e, (np.nan, np.nan, 0)), ln.get(e, (np.nan, np.nan, 0))
                summary.append(f"  {e:<18}{a[0]:>11.2f} / {a[1]:.2f} s ({a[2]:>3}){b[0]:>14.2f} / {b[1]:.2f} s ({b[2]:>3})")
            ratio = ln.get("/attention_maps", (0, np.nan))[1] / l1.get("/attention_maps", (0, np.nan))[1]
            summary += [f"  p95 ratio /attention_maps ({args.clients} vs 1 client): {ratio:.1f}",
                        f"  before load: {before}", f"  after load:  {after}"]
            verdicts += [("load: 0 errors", le + be == 0), ("load: 0 wrong answers", lw + bw == 0),
                         ("load: p95 ratio <= 16", bool(ratio <= 16)),
                         ("load: every planned call made", len(load) == args.clients * args.calls)]
        if not args.skip_soak and left() > 0:
            s = soak(url, proc, gtmp, tmp, args.sessions)
            rows = s["samples"]
            summary.append(f"soak: {s['done']} of {args.sessions} browser sessions; errors "
                           f"{sum(k == 'error' for _, k, _ in s['failures'])}, wrong answers "
                           f"{sum(k == 'wrong' for _, k, _ in s['failures'])}")
            summary += [f"  !! session {i} {k}: {w}" for i, k, w in s["failures"][:12]]
            summary += ["  sessions  RSS MB  GRADIO_TEMP_DIR MB (files)"]
            summary += [f"  {n:>8}  {r:>6.0f}  {m:>8.1f} ({c})" for n, r, m, c in rows]
            at50 = next((r for n, r, *_ in rows if n >= 50), None)
            end = rows[-1]
            delta = end[1] - at50 if at50 is not None else float("nan")
            summary.append(f"  RSS@50 {'n/a' if at50 is None else round(at50)} MB, RSS@{end[0]} {end[1]:.0f} MB, "
                           f"delta {delta:+.0f} MB; {snapshot(proc, gtmp, tmp)}")
            verdicts += [("soak: 0 errors, 0 wrong answers", not s["failures"]),
                         ("soak: RSS delta (50 -> end) <= 150 MB", bool(delta <= 150)),
                         ("soak: every session run", s["done"] == args.sessions)]
    finally:
        code = proc.poll()
        proc.kill()
        proc.wait(timeout=30)
    print(f"\n===== SUMMARY (bench/bench_load.py, {time.time() - t0:.0f} s"
          f"{', STOPPED AT --max-seconds' if left() <= 0 else ''}) =====")
    print(f"app: {'EXITED with code ' + str(code) + ' during the bench' if code is not None else 'alive to the end'}")
    print("\n".join(summary))
    for name, ok in verdicts:
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    print(f"OVERALL: {'PASS' if verdicts and all(ok for _, ok in verdicts) and code is None else 'FAIL'}")


if __name__ == "__main__":
    main()
