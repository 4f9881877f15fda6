"""A hostile crowd against the served app (`python app.py` in its own process, loopback only).

    python -m bench.bench_abuse [--settle 15] [--scale 1.0] [--only new_sessions,live_flood,...]
                                [--max-seconds 120]

(every attack: about 15 minutes on a quiet 2-core machine; --only picks some, --settle 60 checks the RSS
goal at 60 s as docs/security.md's table does)

Each attack runs while an honest visitor calls /attention_maps (gradio_client, one call after another)
and the server's RSS is sampled every 0.2 s; for each it prints the honest p50/p95 during the attack (from
when its requests began: an attack's set-up, such as making its clients, is not counted) vs quiet (measured
before the first attack), the RSS before, at peak and --settle seconds after, and what the attacker got
(status codes). Clients are told apart as a proxy tells them apart: each sends its
own X-Forwarded-For, which uvicorn honours from loopback (FORWARDED_ALLOW_IPS); the attacker is one
client. ATTENTION_GUARD=0 in the environment runs the same attacks without the guard (the "before").

Attacks (counts times --scale; each also stops at --max-seconds; a flood over before the honest visitor made
--min-honest calls is sent again, so that its p95 is of enough calls; a goal with no honest call during its
attack prints NOT MEASURED, neither PASS nor FAIL):
  new_sessions   3,000 live-route calls from 32 threads, each with a fresh session id (Gradio builds a session's state
                 for each before it looks up the function); before it, with the visitor paused: the server's
                 CPU ms per such request vs the same call from a known session
  live_flood     20,000 live-route calls for a real kept pass, from 32 threads
  big_session    300 requests with a 1 MB session id from 16 threads (half the live route, half queue/join)
  large_passes   60 passes at 512 px from one browser session (the ViT tab's upload event), then: is
                 the honest visitor's kept pass still alive (live_base answers)?
  upload_flood   uploads of 4 MB files from 4 threads (400 of them at most): bytes accepted, the
                 temp folder's size
  and bench/abuse_heavy.py's attacks on the computing endpoints (video_slot, canvas_gif, relevance_flood,
  mixed_sessions, mcp_clients, mcp_data, forged_headers, big_body: see its doc), and bench/abuse_class.py's (issue
  48: classroom, a class of 30 sessions behind one address served, every one; address_flood, 60 sessions of one
  address beside the honest visitor at another).
Goals: honest p95 <= 3x quiet during new_sessions, live_flood and the computing attacks; under video_slot,
relevance_flood and mixed_sessions an honest relevance and an honest 1 s video each within 3x their quiet
time plus one attacker job (the longest kind of heavy job the attack sends, each kind timed quiet); RSS
--settle s after within 10% of before; large_passes: RSS <= ATTENTION_STATE_MB + the RSS before, and the
other visitor's pass alive.
Ends with the attacks as Markdown blocks: the light ones (docs/security.md's table sets a run without the guard
beside one with it) and the computing endpoints' (the README's, with the other visitor's heavy calls).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue
import shutil
import signal
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import httpx
import numpy as np
from PIL import Image

from bench import abuse_class as klass
from bench import abuse_heavy as heavy
from bench import bench_load as bl
from bench.common import RssPeak, cpu_seconds, markdown_table, readme_block
from bench.expected import pixels
from bench.page import Browser

HONEST, ATTACKER, VISITOR = "10.0.0.1", "10.66.0.1", "10.0.0.2"  # X-Forwarded-For of each client
# floods repeated until the visitor's p95 means something (mcp_clients: 8 calls, over before the visitor's next call;
# canvas_gif: 4 refusals within a second)
REPEATABLE = {"new_sessions", "live_flood", "big_session", "mcp_clients", "canvas_gif"}
LIGHT = ["new_sessions", "live_flood", "big_session", "large_passes", "upload_flood"]
ATTACKS = LIGHT + list(heavy.ATTACKS) + list(klass.ATTACKS)  # the computing endpoints (issue 32); issue 48's
COMPUTING = {**heavy.ATTACKS, **klass.ATTACKS}


def honest_loop(url: str, out, temp: str) -> None:
    """A visitor calling /attention_maps on one digit, one call after another, forever: puts (wall-clock
    start, seconds, ok) on `out`. Runs in a process of its own, so that the attacker's threads here do not
    take its interpreter lock (the attacker's client is not the visitor's). Its downloads go to `temp`."""
    os.environ["GRADIO_TEMP_DIR"] = temp
    from gradio_client import Client, handle_file

    client = Client(url, verbose=False, headers={"X-Forwarded-For": HONEST})
    while True:
        t, p = time.time(), time.perf_counter()
        try:
            client.predict(handle_file(bl.DIGITS[3]), model="mnist_vit", api_name="/attention_maps")
            ok = True
        except Exception:  # noqa: BLE001 - a failed call is a result here
            ok = False
        out.put((t, time.perf_counter() - p, ok))


class Honest:
    """`honest_loop` in a spawned process; its calls so far, and their latency in a time window."""

    def __init__(self, url: str):
        ctx = multiprocessing.get_context("spawn")
        self._queue = ctx.Queue()
        self._proc = ctx.Process(target=honest_loop, args=(url, self._queue, bl.TEMP[1]), daemon=True)
        self._proc.start()
        self.calls: list[tuple[float, float, bool]] = []

    def drain(self) -> list[tuple[float, float, bool]]:
        while True:
            try:
                self.calls.append(self._queue.get_nowait())
            except queue.Empty:
                return self.calls

    def wait_for(self, n: int, timeout: float = 600) -> None:
        deadline = time.time() + timeout
        while len(self.drain()) < n and time.time() < deadline:
            time.sleep(0.2)

    def stats(self, since: float, until: float = float("inf")) -> tuple[float, float, int, int]:
        """(p50, p95, calls, failures) of the calls started in [since, until) (wall clock)."""
        sel = [(s, ok) for t, s, ok in self.drain() if since <= t < until]
        if not sel:
            return float("nan"), float("nan"), 0, 0
        secs = [s for s, _ in sel]
        return float(np.percentile(secs, 50)), float(np.percentile(secs, 95)), len(sel), sum(not ok for _, ok in sel)

    def pause(self) -> None:
        os.kill(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self._proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        self._proc.kill()
        self._proc.join(timeout=10)


def flood(n: int, threads: int, send, max_seconds: float) -> dict:
    """`send(http, i)` -> a status code (or an exception's name), n times from `threads` threads, each with
    its own keep-alive connection; stops at max_seconds. {code: count, 'sent': n, 'seconds': s}."""
    deadline, counts, lock, local = time.time() + max_seconds, {}, threading.Lock(), threading.local()

    def one(i: int) -> None:
        if time.time() > deadline:
            return
        if not hasattr(local, "http"):
            local.http = httpx.Client(timeout=60, headers={"X-Forwarded-For": ATTACKER})
        try:
            code = send(local.http, i)
        except httpx.HTTPError as e:
            code = type(e).__name__
        with lock:
            counts[code] = counts.get(code, 0) + 1

    t = time.time()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(n)))
    return {**counts, "sent": sum(counts.values()), "seconds": round(time.time() - t, 1)}


# ----- the page's pieces the attacks use -----------------------------------------------------
class Page:
    """The ViT tab as a browser drives it (bench.page.Browser), as one client."""

    def __init__(self, app, client_ip: str):
        self.config = httpx.get(app.url + "config", timeout=30).json()
        self.b = Browser(app.url, self.config)
        self.b.http.headers["X-Forwarded-For"] = client_ip
        self.session = uuid.uuid4().hex[:11]
        self.live_id = self.b.ids["vit-live"]

    def open_pass(self, path: str, resolution: str = "auto") -> str:
        """Upload `path` in the ViT tab (a forward pass kept for the visitor); its live token."""
        image = self.b.upload(path)
        out = self.b.event(self.session, "vit-image", "upload", {"vit-image": image, "vit-resolution": resolution})
        return json.loads(out["vit-live"]["value"] if isinstance(out["vit-live"], dict) else out["vit-live"])["token"]

    def live(self, http: httpx.Client, fn: str, data, session: str | None = None) -> httpx.Response:
        body = {"component_id": self.live_id, "fn_name": fn, "data": data, "session_hash": session or self.session}
        return http.post(self.b.http.base_url.join("/gradio_api/component_server"), json=body)

    def alive(self, token: str) -> bool:
        """Whether the pass named by `token` is still kept (its base picture answers)."""
        return self.live(self.b.http, "live_base", token).json() is not None


def noisy_digit(i: int, size: int = 28) -> str:
    """A distinct picture per i (a digit plus seeded noise): a new pass on the server."""
    a = pixels(bl.DIGITS[i % 10], "L").astype(int) + np.random.default_rng(1000 + i).integers(-40, 41, (28, 28))
    path = os.path.join(bl.TEMP[5], f"abuse_{i:04d}.png")
    Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).resize((size, size)).save(path)
    return path


# ----- the attacks ---------------------------------------------------------------------------
def fresh_session_call(page):
    """A live-route call naming a fresh session id and no function (Gradio: 404 after building the state)."""

    def send(http, i):
        return page.live(http, "no_such_function", [], session=uuid.uuid4().hex[:11]).status_code

    return send


def session_cost(app, page, honest, n: int = 300) -> str:
    """The server's CPU ms per request with a fresh session id vs a known one, the honest visitor paused."""
    known = uuid.uuid4().hex[:11]
    httpx.post(app.url + "gradio_api/cancel", json={"session_hash": known, "fn_index": 0, "event_id": "x"})

    def same(http, i):  # each from a client of its own, so that every call reaches Gradio
        http.headers["X-Forwarded-For"] = f"10.77.{i // 250}.{i % 250}"
        return page.live(http, "no_such_function", [], session=known).status_code

    honest.pause()
    try:
        time.sleep(2)  # the visitor's call in flight, if any, ends
        i0, t0 = cpu_seconds(app.proc.pid), time.time()
        time.sleep(5)
        c0, t1 = cpu_seconds(app.proc.pid), time.time()
        idle = (c0 - i0) / (t1 - t0)  # CPU seconds a second of the idle server (its queue's polling)
        base = flood(n, 8, same, 120)
        c1, t2 = cpu_seconds(app.proc.pid), time.time()
        got = flood(n, 32, fresh_session_call(page), 120)
        c2, t3 = cpu_seconds(app.proc.pid), time.time()
    finally:
        honest.resume()
    per_known = 1000 * (c1 - c0 - idle * (t2 - t1)) / base["sent"]
    per_fresh = 1000 * (c2 - c1 - idle * (t3 - t2)) / got["sent"]
    return (
        f"server CPU per request (visitor paused, idle {1000 * idle:.0f} ms/s taken off): fresh session id "
        f"{per_fresh:.2f} ms {got}, known session id {per_known:.2f} ms {base} ({per_fresh / per_known:.2f}x)"
    )


def new_sessions(app, page, n, max_s):
    return flood(n, 32, fresh_session_call(page), max_s), ""


def live_flood(app, page, n, max_s):
    token = page.open_pass(noisy_digit(500))
    calls = [(token, [r, c], layer) for r in range(7) for c in range(7) for layer in range(4)]

    def ask(http, i):
        tok, q, layer = calls[i % len(calls)]
        return page.live(http, "live_maps", [tok, q, layer]).status_code

    return flood(n, 32, ask, max_s), ""


def big_session(app, page, n, max_s):
    huge = "x" * 1_000_000

    def send(http, i):
        if i % 2:
            return page.live(http, "live_maps", ["x.y", None, 0], session=huge).status_code
        body = {"data": [], "fn_index": 0, "session_hash": huge}
        return http.post(app.url + "gradio_api/queue/join", json=body).status_code

    return flood(n, 16, send, max_s), ""


def large_passes(app, page, n, max_s, visitor_token):
    attacker = Page(app, ATTACKER)
    deadline, counts = time.time() + max_s, {}
    for i in range(n):
        if time.time() > deadline:
            break
        try:
            attacker.open_pass(noisy_digit(600 + i, 112), resolution="512")
            counts["ok"] = counts.get("ok", 0) + 1
        except Exception as e:  # noqa: BLE001 - a refusal is a result here
            key = f"{type(e).__name__}: {str(e)[:80]}"
            counts[key] = counts.get(key, 0) + 1
    alive = page.alive(visitor_token)
    return {**counts, "sent": sum(counts.values())}, f"the other visitor's kept pass alive after: {alive}"


def upload_flood(app, page, n, max_s):
    blob = os.urandom(4 << 20)

    def send(http, i):
        r = http.post(app.url + "gradio_api/upload", files=[("files", (f"x{i}.png", blob, "image/png"))])
        return r.status_code

    got = flood(n, 4, send, max_s)
    mb, files = bl.usage(app.env["GRADIO_TEMP_DIR"])
    return got, f"GRADIO_TEMP_DIR after: {mb:.0f} MB in {files} files ({got.get(200, 0) * 4} MB accepted)"


# ----- main ----------------------------------------------------------------------------------
def main() -> list[Attack]:
    """Runs the attacks `--only` names; their outcomes (`bench.bench_abuse_views` prints its own table of them)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settle", type=float, default=15.0, help="seconds to wait after each attack for its RSS")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every attack's count (quick runs)")
    ap.add_argument("--only", default=",".join(ATTACKS), help=f"comma-separated attacks to run, of {','.join(ATTACKS)}")
    ap.add_argument("--max-seconds", type=float, default=120.0, help="stop each attack after this long")
    ap.add_argument("--min-honest", type=int, default=20, help="repeat a flood until the visitor made this many calls")
    args = ap.parse_args()
    bl.go_offline()
    t0 = time.time()
    app = bl.start_app()
    guard = os.environ.get("ATTENTION_GUARD", "1") not in {"0", "false", "no", "off"}
    state_mb = float(os.environ.get("ATTENTION_STATE_MB") or 1024)
    print(f"app: {app.url} pid {app.proc.pid}, guard {'on' if guard else 'OFF'}; {bl.snapshot(app)}", flush=True)
    lines, verdicts, rows = [], [], []
    try:
        honest, page = Honest(app.url), Page(app, VISITOR)
        visitor_token = page.open_pass(noisy_digit(0))  # another visitor's kept pass
        honest.wait_for(23)  # 3 to warm up, 20 quiet
        quiet = honest.stats(honest.calls[3][0], honest.calls[22][0] + 1e-6)
        lines.append(f"quiet: honest /attention_maps p50 {quiet[0]:.3f} s, p95 {quiet[1]:.3f} s ({quiet[2]} calls)")
        print(lines[-1], flush=True)
        counts = dict(new_sessions=3000, live_flood=20_000, big_session=300, large_passes=60, upload_flood=400)
        counts.update({k: n for k, (_, n) in COMPUTING.items()})
        if any(a in heavy.HEAVY_TIMED for a in args.only.split(",")):
            honest.pause()  # quiet: nothing else running (a niced heavy job yields to the visitor's forwards)
            try:
                lines.append(heavy.quiet_heavy(app.url, args.only.split(",")))
            finally:
                honest.resume()
            print(lines[-1], flush=True)
        if "new_sessions" in args.only:
            cost = session_cost(app, page, honest)
            lines.append(cost)
            print(cost, flush=True)
        for name in [a for a in args.only.split(",") if a]:
            n = max(1, int(counts[name] * args.scale))
            before = bl.rss_mb(app)
            start, heavy.MARK[0] = time.time(), 0.0
            with RssPeak(app.proc.pid) as peak:
                extra = (visitor_token,) if name == "large_passes" else ()
                attack = COMPUTING[name][0] if name in COMPUTING else globals()[name]
                got, note = attack(app, page, n, args.max_seconds, *extra)
                # a flood over before the visitor made --min-honest calls goes on (again n) until they have
                while name in REPEATABLE and honest.stats(heavy.MARK[0] or start)[2] < args.min_honest:
                    if time.time() - start > args.max_seconds:
                        break
                    more, note = attack(app, page, n, args.max_seconds)
                    got = {k: got.get(k, 0) + more.get(k, 0) for k in {*got, *more}}
            during = honest.stats(heavy.MARK[0] or start, time.time())  # from when its requests began
            time.sleep(args.settle)
            after = bl.rss_mb(app)
            ratio = during[1] / quiet[1]  # nan when the visitor made no call during it: not measured
            lines += [
                f"{name} (n={n}): attacker got {got}",
                f"  honest p50 {during[0]:.3f} s, p95 {during[1]:.3f} s ({during[2]} calls, {during[3]} failed); "
                f"p95 {ratio:.1f}x quiet",
                f"  RSS before {before:.0f} MB, peak {peak.peak:.0f} MB, {args.settle:.0f} s after {after:.0f} MB "
                f"({100 * (after - before) / before:+.1f}%)",
            ] + ([f"  {note}"] if note else [])
            print("\n".join(lines[-4 if note else -3 :]), flush=True)
            jobs = heavy.HONEST_JOBS.get(name, "")
            rows.append(Attack(name, n, got, ratio, during[2], during[3], before, peak.peak, after, jobs))
            if name in ("new_sessions", "live_flood", *COMPUTING):
                verdicts.append((f"{name}: honest p95 <= 3x quiet", None if during[2] == 0 else bool(ratio <= 3)))
            if name in heavy.HEAVY_TIMED:
                verdicts.append((f"{name}: honest relevance and video within 3x quiet + one job", "[goal met]" in note))
            if name == "classroom":
                goal = "classroom: every student served, none refused, the last within 60 s"
                verdicts.append((goal, "[goal met]" in note))
            verdicts.append((f"{name}: RSS {args.settle:.0f} s after within 10% of before", after <= 1.1 * before))
            if name == "mcp_data":
                note, ok = heavy.mcp_data_settled(app, args.settle)
                lines.append(f"  {note}")
                print(lines[-1], flush=True)
                verdicts.append((f"mcp_data: MCP copies swept, temp within its bound {args.settle:.0f} s after", ok))
            if name == "large_passes":
                verdicts.append(
                    ("large_passes: peak RSS <= ATTENTION_STATE_MB + before", peak.peak <= state_mb + before)
                )
                verdicts.append(("large_passes: the other visitor's pass alive", "alive after: True" in note))
    finally:
        if "honest" in locals():
            honest.stop()
        code = app.proc.poll()
        app.proc.kill()
        app.proc.wait(timeout=30)
        tail = app.log.read_text(errors="replace")
        app.log.unlink()
        for d in bl.TEMP:
            shutil.rmtree(d, ignore_errors=True)
    guarded = "on" if guard else "OFF"
    print(f"\n===== SUMMARY: python -m bench.bench_abuse, guard {guarded}, {time.time() - t0:.0f} s =====")
    print("app: alive to the end" if code is None else f"app: EXITED with code {code}:\n{tail[-2000:]}")
    print(f"app log: {tail.count('Traceback')} tracebacks, {len(tail) / 1000:.0f} kB")
    print("\n".join(lines))
    for name, ok in verdicts:
        print(f"{verdict(ok)}  {name}")
    light = [a for a in rows if a.name not in COMPUTING]
    if light:  # docs/security.md's table
        print(readme_block("bench_abuse", "attacks", attacks_table(light, guarded, args.settle)))
    if computing := [a for a in rows if a.name in COMPUTING]:  # the README's: the computing endpoints (issue 32)
        print(readme_block("bench_abuse", "heavy", attacks_table(computing, guarded, args.settle, heavy=True)))
    return rows


class Attack(NamedTuple):
    """One attack's outcome: what the attacker got, the honest visitor's p95 / quiet, the server's RSS (MB)."""

    name: str
    n: int
    got: dict
    p95_ratio: float
    calls: int
    failed: int
    rss_before: float
    rss_peak: float
    rss_after: float
    honest_jobs: str = ""  # the honest heavy visitor's relevance and video during it, against their goals


def verdict(ok: bool | None) -> str:
    """A goal's verdict: PASS, FAIL, or NOT MEASURED (None: no honest call during the attack, a nan p95)."""
    return "NOT MEASURED (0 honest calls during it)" if ok is None else ("PASS" if ok else "FAIL")


def got(counts: dict) -> str:
    """What the attacker got: {status code or outcome: count, 'sent': n, 'seconds': s} in words."""
    outcomes = ", ".join(f"{k}: {v}" for k, v in counts.items() if k not in ("sent", "seconds"))
    took = f" in {counts['seconds']:.0f} s" if "seconds" in counts else ""
    return f"{outcomes} ({counts.get('sent', 0)} sent{took})"


def attacks_table(rows: list[Attack], guard: str, settle: float, heavy: bool = False) -> str:
    """The attacks of one run (guard `guard`) as a Markdown table; `heavy`: the computing endpoints' attacks, with
    another visitor's relevance and video calls during each against their goal (`abuse_heavy.HONEST_JOBS`)."""
    jobs = ["another visitor's relevance and video (goal: 3x quiet + one attacker job)"] if heavy else []
    header = [
        "attack",
        f"guard {guard}: attacker got",
        "visitor p95 / quiet",
        "visitor calls failed",
        *jobs,
        "server RSS",
    ]
    return markdown_table(
        header,
        [
            (
                f"{a.name} ({a.n:,})",
                got(a.got),
                f"{a.p95_ratio:.1f}x" if a.calls else "not measured",
                f"{a.failed} of {a.calls}",
                *([a.honest_jobs or "-"] if heavy else []),
                f"peak +{a.rss_peak - a.rss_before:.0f} MB; {settle:.0f} s after {a.rss_after - a.rss_before:+.0f} MB "
                f"({100 * (a.rss_after - a.rss_before) / a.rss_before:+.1f}%)",
            )
            for a in rows
        ],
    )


if __name__ == "__main__":
    main()
