"""bench_abuse's attacks on the computing endpoints (issue 32), each with its goal; `bench.bench_abuse` runs them.

Each attack is `(app, page, n, max_seconds) -> (what the attacker got, a note)`; the ones on the heavy lane
also time one honest relevance call and one honest short video (another visitor) while they run, against
the same calls timed quiet (`quiet_heavy`), and say whether each is within 3x quiet plus one attacker job:
the longest, timed quiet, of the kinds of heavy job that attack sends (`JOBS`).

  video_slot      n /attention_video jobs of the digits clip at 30 fps from one client over 4 sessions
  canvas_gif      n GIFs of 1x1 frames on a 16000x16000 canvas (a few kB each) to /attention_video (sent again until
                  the honest visitor made --min-honest calls: each is refused within a second)
  relevance_flood n /relevance calls at 256 px (4,096 tokens) from one client over 4 sessions
  mixed_sessions  n calls (maps, relevance, video in turn) from 20 sessions of one client
  mcp_clients     8 MCP clients side by side (addresses of their own) calling the attention_maps tool (the round
                  sent again until the honest visitor made --min-honest calls)
  mcp_data        n MCP calls each with its own 1 MB data: PNG, from one client: the upload folder just after
                  and --settle s after (goal: Gradio's MCP copies swept, one tracked copy of each file left)
  forged_headers  n new-session calls at once, each with a forged X-Forwarded-For entry left of the proxy's
  big_body        2n calls with a 900 kB value (too few values; as the frame rate): the answers' and the log's size
"""

from __future__ import annotations

import base64
import io
import json
import multiprocessing
import os
import queue
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
from PIL import Image

from bench import bench_load as bl
from bench.common import ROOT

ATTACKER = "10.66.0.1"
HONEST_HEAVY = "10.0.0.3"  # the visitor whose relevance and video calls are timed
CLIP = str(ROOT / "examples" / "videos" / "digits.mp4")
QUIET: dict[str, float] = {}  # honest relevance / video seconds, quiet; each kind of attacker job (JOBS), quiet
_MCP_DATA: dict[str, float] = {}  # mcp_data's upload folder MB before, MB of files sent, calls


_URL: list[str] = [""]
_CLIENTS: dict = {}
HONEST_JOBS: dict[str, str] = {}  # attack -> the honest heavy visitor's calls during it, against their goals
MARK = [0.0]  # when the running attack's requests began (its set-up done); bench_abuse times the visitor from then


def mark() -> None:
    """The running attack's requests begin now (once per attack: bench_abuse resets MARK before each): the
    honest visitor's calls are counted from here, not during the attack's set-up (its clients made, the honest
    heavy visitor's process started), which is this bench's own work on the shared cores, not the attack."""
    if not MARK[0]:
        MARK[0] = time.time()


def _client(ip: str):
    from gradio_client import Client

    if ip not in _CLIENTS:
        _CLIENTS[ip] = Client(_URL[0], verbose=False, headers={"X-Forwarded-For": ip})
    return _CLIENTS[ip]


def _noise(i: int, side: int) -> str:
    path = os.path.join(bl.TEMP[5], f"heavy_{side}_{i}.png")
    Image.fromarray((np.random.default_rng(i).random((side, side)) * 255).astype("uint8")).save(path)
    return path


def honest_relevance() -> float:
    from gradio_client import handle_file

    t = time.perf_counter()
    _client(HONEST_HEAVY).predict(handle_file(_noise(int(time.time() * 1000) % 10**6, 64)), api_name="/relevance")
    return time.perf_counter() - t


def honest_video() -> float:
    from gradio_client import handle_file

    t = time.perf_counter()
    _client(HONEST_HEAVY).predict(handle_file(CLIP), "mnist_vit", seconds=1, fps=5, api_name="/attention_video")
    return time.perf_counter() - t


def _job_args(kind: str, i: int) -> tuple[tuple, dict]:
    """(args, kwargs) of one attacker job of `kind` (a key of JOB_KINDS); `i` picks its picture."""
    from gradio_client import handle_file

    if kind == "video at 30 fps":
        return (handle_file(CLIP), "mnist_vit"), {"fps": 30, "api_name": "/attention_video"}
    side = int(kind.split()[-2])  # "relevance at 256 px"
    return (handle_file(_noise(i, side)), "mnist_vit", "", str(side)), {"api_name": "/relevance"}


JOB_KINDS = ("video at 30 fps", "relevance at 256 px", "relevance at 128 px")
JOBS = {  # the kinds of heavy job each attack sends: its "one bounded job" is the longest of them, timed quiet
    "video_slot": ("video at 30 fps",),
    "relevance_flood": ("relevance at 256 px",),
    "mixed_sessions": ("video at 30 fps", "relevance at 128 px"),
}


def quiet_heavy(url: str, attacks: list[str]) -> str:
    """Times the honest relevance and video calls, and one attacker job of each kind `attacks` send (JOBS; each
    from a client of its own, a picture no attack sends), with nothing else running."""
    _URL[0] = url
    honest_relevance()
    QUIET["relevance"] = min(honest_relevance() for _ in range(2))
    QUIET["video"] = min(honest_video() for _ in range(2))
    kinds = [kind for kind in JOB_KINDS if any(kind in JOBS.get(a, ()) for a in attacks)]
    for k, kind in enumerate(kinds):
        args, kwargs = _job_args(kind, 4242 + k)
        t = time.perf_counter()
        _client(f"10.0.0.{99 - k}").predict(*args, **kwargs)
        QUIET[kind] = time.perf_counter() - t
    jobs = ", ".join(f"{kind} {QUIET[kind]:.2f} s" for kind in kinds)
    return (
        f"quiet: honest relevance {QUIET['relevance']:.2f} s, honest 1 s video {QUIET['video']:.2f} s; one attacker "
        f"job: {jobs} (video: the digits clip)"
    )


def one_job(attack: str) -> tuple[str, float]:
    """The longest kind of heavy job `attack` sends and its quiet seconds: the "one bounded job" of its goal."""
    return max(((kind, QUIET[kind]) for kind in JOBS[attack]), key=lambda kv: kv[1])


def _honest_heavy(url: str, images: str, ready, go, out) -> None:
    """The honest heavy visitor, in a process of its own (the attacker's client threads in this one would take
    its interpreter lock, and the time it waited for them would count as the server's): its session opened
    by one relevance call as when timed quiet, then, 1 s after `go`, one relevance and one video call, each
    put on `out` as (name, seconds or the failure)."""
    _URL[0] = url
    bl.TEMP[:] = [images] * 6  # where `_noise` writes its pictures
    honest_relevance()
    ready.set()
    go.wait(600)
    time.sleep(1.0)
    for name, fn in (("relevance", honest_relevance), ("video", honest_video)):
        try:
            out.put((name, fn()))
        except Exception as e:  # noqa: BLE001 - a failure is a result
            out.put((name, f"{type(e).__name__}: {str(e)[:80]}"))


def _honest_during(attack, name: str) -> tuple[dict, str, bool]:
    """Runs `attack()` while the honest heavy visitor makes one relevance and one video call (after 1 s, from
    `_honest_heavy`'s process); goal: each within 3x its quiet time plus one attacker job (`one_job(name)`: the
    longest kind of job attack `name` sends, timed quiet)."""
    ctx = multiprocessing.get_context("spawn")
    ready, go, out = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=_honest_heavy, args=(_URL[0], bl.TEMP[5], ready, go, out), daemon=True)
    proc.start()
    ready.wait(300)
    mark()
    go.set()
    got = attack()
    timed: dict[str, float | str] = {}
    for _ in range(2):
        try:
            call, v = out.get(timeout=600)
        except queue.Empty:
            break
        timed[call] = v
    proc.join(30)
    if proc.is_alive():
        proc.kill()
    ok = True
    kind, job_s = one_job(name)
    parts, cells = [], []
    for call in ("relevance", "video"):
        v = timed.get(call, "not done")
        if isinstance(v, float):
            bound = 3 * QUIET[call] + job_s
            ok &= v <= bound
            parts.append(f"honest {call} {v:.1f} s (goal <= 3 x {QUIET[call]:.2f} + {job_s:.2f} s = {bound:.1f} s)")
            cells.append(f"{call} {v:.1f} s (goal {bound:.1f} s)")
        else:
            ok = False
            parts.append(f"honest {call}: {v}")
            cells.append(f"{call}: {str(v)[:40]}")
    HONEST_JOBS[name] = ", ".join(cells) + (": met" if ok else ": MISSED")
    return got, "; ".join(parts) + f"; one job: the attack's longest, {kind}", ok


DRAIN_S = 600.0  # the most `_submit_all` waits, after its clients gave up, for the server to end their jobs


def _submit_all(calls, max_s: float) -> dict:
    """Submits every (client, args, kwargs) at once, then waits up to `max_s`: {'done'|'refused'|error: count}.
    Jobs its clients gave up on (a TimeoutError here) still run on the server, which ends what it accepted: it
    then waits for those to end too (up to DRAIN_S; counted as "ended after": how many, and when), so that the
    RSS measured --settle s after the attack is memory held after its work, not the work still running."""
    from gradio_client.exceptions import ValidationError

    jobs = [c.submit(*a, **k) for c, a, k in calls]
    counts: dict[str, int] = {}
    start = time.time()
    deadline = start + max_s
    for j in jobs:
        try:
            j.result(timeout=max(1.0, deadline - time.time()))
            key = "done"
        except ValidationError as e:
            key = "refused at once" if "Not queued" in str(e) else f"invalid: {str(e)[:60]}"
        except Exception as e:  # noqa: BLE001
            key = f"{type(e).__name__}: {str(e)[:60]}"
        counts[key] = counts.get(key, 0) + 1
    late = sum(not j.done() for j in jobs)
    while not all(j.done() for j in jobs) and time.time() < start + max_s + DRAIN_S:
        time.sleep(0.5)
    if late:
        counts[f"ended after the client gave up, by {time.time() - start:.0f} s"] = late
    return {**counts, "sent": len(jobs)}


def _sessions(ip: str, k: int):
    """The attacker's `k` gradio_client sessions from client `ip`. ssl_verify=False: gradio_client opens an httpx
    client for each upload, join and download, and each loads the system's CA certificates (about 15 ms of CPU;
    never used over plain http): an attacker's own machine pays that, not the server's cores, which this
    bench's attacker shares. The honest visitors keep gradio_client's defaults (their quiet times include it)."""
    from gradio_client import Client

    return [Client(_URL[0], verbose=False, headers={"X-Forwarded-For": ip}, ssl_verify=False) for _ in range(k)]


def _one_kind(kind: str, name: str):
    """An attack of n jobs of one `kind` (`_job_args`) from one client over 4 sessions, sent at once while the
    honest heavy visitor calls (`_honest_during`: its goal's job is the attack's, `name`)."""

    def attack(app, page, n, max_s):
        cs = _sessions(ATTACKER, 4)
        calls = [(cs[i % 4], *_job_args(kind, i)) for i in range(n)]
        got, note, ok = _honest_during(lambda: _submit_all(calls, max_s), name)
        return got, note + (" [goal met]" if ok else " [GOAL MISSED]")

    attack.__name__ = name
    return attack


video_slot = _one_kind("video at 30 fps", "video_slot")
relevance_flood = _one_kind("relevance at 256 px", "relevance_flood")


_CANVAS: dict = {}  # canvas_gif's GIF and client, made once (the attack is sent again until enough honest calls)


def canvas_gif(app, page, n, max_s):
    from gradio_client import handle_file

    from tests.test_video_decoding import canvas_gif as make

    if _CANVAS.get("url") != app.url:
        path = make(os.path.join(bl.TEMP[5], "canvas.gif"), 16000, frames=12_200)
        _CANVAS.update(url=app.url, path=path, client=_sessions(ATTACKER, 1)[0])
    mark()
    t, path = time.perf_counter(), _CANVAS["path"]
    calls = [(_CANVAS["client"], (handle_file(path), "mnist_vit"), {"fps": 0.1, "api_name": "/attention_video"})] * n
    got = _submit_all(calls, max_s)
    return got, f"{os.path.getsize(path) / 1000:.0f} kB GIF; all answered in {time.perf_counter() - t:.1f} s"


def mixed_sessions(app, page, n, max_s):
    from gradio_client import handle_file

    cs = _sessions(ATTACKER, 20)
    kinds = [
        ((handle_file(bl.DIGITS[3]), "mnist_vit"), {"api_name": "/attention_maps"}),
        _job_args("relevance at 128 px", 900),
        _job_args("video at 30 fps", 0),
    ]
    calls = [(cs[i % 20], *kinds[i % 3]) for i in range(n)]
    got, note, ok = _honest_during(lambda: _submit_all(calls, max_s), "mixed_sessions")
    return got, note + (" [goal met]" if ok else " [GOAL MISSED]")


def _mcp_call(http: httpx.Client, url: str, tool: str, arguments: dict) -> str:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    headers = {"Accept": "application/json, text/event-stream"}
    r = http.post(url + "gradio_api/mcp/", json=body, headers=headers, timeout=300)
    if r.status_code != 200:
        return str(r.status_code)
    text = r.text
    data = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    res = (data[-1] if data else {}).get("result", {})
    return "error" if res.get("isError") or not data else "ok"


def _png_data_url(i: int, side: int) -> str:
    buf = io.BytesIO()
    Image.fromarray((np.random.default_rng(i).random((side, side)) * 255).astype("uint8")).save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def mcp_clients(app, page, n, max_s):
    data = _png_data_url(1, 28)

    def one(i):
        with httpx.Client(headers={"X-Forwarded-For": f"10.55.0.{i + 1}"}) as http:
            return _mcp_call(http, app.url, "attention_maps", {"image": data, "model": "mnist_vit"})

    with ThreadPoolExecutor(8) as pool:
        out = list(pool.map(one, range(8)))
    got = {k: out.count(k) for k in set(out)}
    return {**got, "sent": 8}, f"8 MCP clients at once: {out.count('ok')} answered, {8 - out.count('ok')} not"


def mcp_data(app, page, n, max_s):
    """n MCP calls from one client, each with its own ~1 MB data: PNG (the same bytes would be one file)."""
    from attention.ui.common.server import MCP_COPIES, MCP_COPY_AGE

    _MCP_DATA["before"] = bl.usage(app.env["GRADIO_TEMP_DIR"])[0]
    counts: dict[str, int] = {}
    deadline, sent = time.time() + max_s, 0
    with httpx.Client(headers={"X-Forwarded-For": ATTACKER}) as http:
        for i in range(n):
            if time.time() > deadline:
                break
            data = _png_data_url(5000 + i, 1000)  # 1 MB of grey noise
            sent += len(base64.b64decode(data.split(",", 1)[1]))
            k = _mcp_call(http, app.url, "attention_maps", {"image": data, "model": "mnist_vit"})
            counts[k] = counts.get(k, 0) + 1
    _MCP_DATA.update(sent=sent / 1e6, calls=sum(counts.values()))
    after, files = bl.usage(app.env["GRADIO_TEMP_DIR"])
    copies = bl.usage(os.path.join(app.env["GRADIO_TEMP_DIR"], MCP_COPIES))[0]
    return {**counts, "sent": sum(counts.values())}, (
        f"{sent / 1e6:.0f} MB of data: files in all; just after: GRADIO_TEMP_DIR +{after - _MCP_DATA['before']:.0f} MB "
        f"({files} files), {copies:.0f} MB of it Gradio's MCP copies ({MCP_COPIES}/, swept after {MCP_COPY_AGE:.0f} s)"
    )


def mcp_data_settled(app, settle: float) -> tuple[str, bool]:
    """After the settle: the MCP copies swept, and the upload folder grown by at most one copy of each file
    sent (Gradio's tracked upload, deleted at ATTENTION_FILE_TTL) and 0.1 MB of answer files a call."""
    from attention.ui.common.server import MCP_COPIES

    grown = bl.usage(app.env["GRADIO_TEMP_DIR"])[0] - _MCP_DATA["before"]
    copies = bl.usage(os.path.join(app.env["GRADIO_TEMP_DIR"], MCP_COPIES))[0]
    bound = _MCP_DATA["sent"] + 0.1 * _MCP_DATA["calls"]
    note = (
        f"mcp_data {settle:.0f} s after: GRADIO_TEMP_DIR +{grown:.0f} MB (bound {bound:.0f} MB: one copy of each "
        f"file sent and its answer), MCP copies {copies:.1f} MB"
    )
    return note, grown <= bound and copies == 0


def forged_headers(app, page, n, max_s):
    """n new-session calls at once (8 threads), each with its own forged entry left of the proxy's: one
    client's new sessions (its burst admitted, paced; the rest refused), not n clients' (all admitted at once)."""
    codes: dict[int | str, int] = {}
    t = time.perf_counter()

    def one(i: int) -> int | str:
        h = {"X-Forwarded-For": f"10.{i % 250}.{i // 250}.9, {ATTACKER}"}  # forged entry, then the proxy's
        body = {"data": [None] * 11}  # a call with no session: a new one (the event then fails: no image)
        try:
            return http.post(app.url + "gradio_api/call/attention_maps", json=body, headers=h).status_code
        except httpx.HTTPError as e:
            return type(e).__name__

    with httpx.Client(timeout=60) as http, ThreadPoolExecutor(8) as pool:
        for c in pool.map(one, range(n)):
            codes[c] = codes.get(c, 0) + 1
    took = time.perf_counter() - t
    return {**codes, "sent": n}, f"{codes.get(429, 0)} of {n} refused as one client's new sessions ({took:.0f} s)"


def big_body(app, page, n, max_s):
    size0 = app.log.stat().st_size
    sizes = []
    with httpx.Client(headers={"X-Forwarded-For": ATTACKER}, timeout=120) as http:
        for _ in range(n):
            for data in (
                [None, "x" * 900_000],
                [None, "mnist_vit", -1, 0, "mean", 0.6, "auto", "x" * 900_000] + [None] * 5,
            ):
                body = {"data": data, "session_hash": uuid.uuid4().hex[:11]}
                r = http.post(app.url + "gradio_api/call/attention_video", json=body)
                text = r.text
                if r.status_code == 200 and "event_id" in text:
                    eid = r.json()["event_id"]
                    text = http.get(app.url + f"gradio_api/call/attention_video/{eid}").text
                sizes.append(len(text))
    grown = app.log.stat().st_size - size0
    return {"sent": 2 * n, "largest answer (bytes)": max(sizes)}, (
        f"900 kB values (too few values; a bad frame rate): server log +{grown / 1000:.1f} kB for {2 * n} calls"
    )


ATTACKS = {
    "video_slot": (video_slot, 12),
    "canvas_gif": (canvas_gif, 4),
    "relevance_flood": (relevance_flood, 8),
    "mixed_sessions": (mixed_sessions, 60),
    "mcp_clients": (mcp_clients, 8),
    "mcp_data": (mcp_data, 60),
    "forged_headers": (forged_headers, 40),
    "big_body": (big_body, 10),
}
HEAVY_TIMED = set(JOBS)
