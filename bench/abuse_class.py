"""bench_abuse's attacks for issue 48: a class behind one address, and a flooder behind another; `bench.bench_abuse`
runs them (each attack is `(app, page, n, max_seconds) -> (what the attacker got, a note)`).

  classroom      n gradio_client sessions on one address (a class behind its school's NAT), made first (as the
                 students open the page), then each asks one /attention_maps of its own picture at the same
                 moment; then n sessions of another school's address each asking once, spread over 10 s (one
                 address's second 30 new sessions within a minute would wait for the new-session rate,
                 ATTENTION_NEW_SESSIONS_PER_MIN: paced, one per 2 s). Goals: every
                 call of both rounds served, none refused, the last of the first round within 60 s; and
                 bench_abuse's own, the honest visitor's /attention_maps p95 <= 3x quiet meanwhile.
  address_flood  n sessions on one address (raw HTTP: Gradio's upload, queue/join and queue/data stream, cheaper
                 for the attacker than gradio_client) each asking /attention_maps again and again, for 30 s (or
                 --max-seconds); goal: bench_abuse's, the honest visitor at another address p95 <= 3x quiet.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
from PIL import Image

from bench import abuse_heavy as heavy
from bench import bench_load as bl

CLASS, CLASS2, FLOODER = "10.48.0.1", "10.48.0.2", "10.48.0.66"  # X-Forwarded-For of two schools, of the flooder
FLOOD_SECONDS = 30.0


def _picture(i: int) -> str:
    path = os.path.join(bl.TEMP[5], f"class_{i}.png")
    if not os.path.exists(path):
        Image.fromarray((np.random.default_rng(4800 + i).random((32, 32)) * 255).astype("uint8")).save(path)
    return path


def _round(clients: list, offsets: list[float], first: int) -> tuple[dict[str, int], float]:
    """Each client asks one /attention_maps of its own picture `offsets[i]` s after the round starts: (outcomes,
    seconds until the last answer)."""
    from gradio_client import handle_file
    from gradio_client.exceptions import ValidationError

    t0 = time.perf_counter()

    def one(i: int) -> tuple[str, float]:
        time.sleep(max(0.0, t0 + offsets[i] - time.perf_counter()))
        try:
            clients[i].predict(handle_file(_picture(first + i)), "mnist_vit", api_name="/attention_maps")
            out = "done"
        except ValidationError as e:
            out = "refused" if "Not queued" in str(e) else f"invalid: {str(e)[:60]}"
        except Exception as e:  # noqa: BLE001 - a failed call is an outcome here
            out = f"{type(e).__name__}: {str(e)[:60]}"
        return out, time.perf_counter() - t0

    with ThreadPoolExecutor(len(clients)) as pool:
        answers = list(pool.map(one, range(len(clients))))
    counts: dict[str, int] = {}
    for out, _ in answers:
        counts[out] = counts.get(out, 0) + 1
    return counts, max(t for _, t in answers)


def _students(url: str, n: int, school: str = CLASS) -> list:
    """`n` gradio_client sessions on `school`'s address, made one after another (as the students open the page).
    Patient (60 s, not httpx's 5 s, for each request: on a loaded machine the bench's own set-up and joins are
    slow; the goals time the answers); ssl_verify=False as `abuse_heavy._sessions` says."""
    from gradio_client import Client

    kw = dict(verbose=False, headers={"X-Forwarded-For": school}, ssl_verify=False)
    return [Client(url, httpx_kwargs={"timeout": httpx.Timeout(60)}, **kw) for _ in range(n)]


def classroom(app, page, n, max_s):
    at_once = _students(app.url, n)  # the students open the page (set-up: not the attack)
    heavy.mark()
    first, last = _round(at_once, [0.0] * n, 0)
    spread_clients = _students(app.url, n, CLASS2)  # another class (its address's new sessions not yet spent)
    spread, _ = _round(spread_clients, [10.0 * i / max(1, n - 1) for i in range(n)], n)
    for c in at_once + spread_clients:
        c.close()
    ok = first == {"done": n} and spread == {"done": n} and last <= 60
    got = {f"at once: {k}": v for k, v in first.items()} | {f"spread over 10 s: {k}": v for k, v in spread.items()}
    note = f"{n} at once: the last answered {last:.1f} s after they asked (goal: all served, none refused, <= 60 s)"
    return {**got, "sent": 2 * n}, note + (" [goal met]" if ok else " [GOAL MISSED]")


def _maps_loop(url: str, fn: int, data: list, session: str, until: float, counts: dict, lock) -> None:
    """One flooding session: /attention_maps over Gradio's queue API again and again until `until`."""
    with httpx.Client(base_url=url, headers={"X-Forwarded-For": FLOODER}, timeout=httpx.Timeout(30, read=60)) as http:
        while time.time() < until:
            try:
                join = http.post("gradio_api/queue/join", json={"data": data, "fn_index": fn, "session_hash": session})
                if join.status_code != 200:
                    out = "refused" if "Not queued" in join.text else str(join.status_code)
                else:
                    out = "no answer"
                    with http.stream("GET", "gradio_api/queue/data", params={"session_hash": session}) as stream:
                        for line in stream.iter_lines():
                            m = json.loads(line[5:]) if line.startswith("data:") else {}
                            if m.get("msg") == "process_completed":
                                out = "done" if m.get("success") else "error"
                                break
            except httpx.HTTPError as e:
                out = type(e).__name__
            with lock:
                counts[out] = counts.get(out, 0) + 1


def address_flood(app, page, n, max_s):
    url = app.url
    info = httpx.get(url + "config", timeout=60).json()
    dep = next(d for d in info["dependencies"] if d.get("api_name") == "attention_maps")
    defaults = {c["id"]: c["props"].get("value") for c in info["components"]}
    with open(_picture(999), "rb") as f:
        files = [("files", ("p.png", f, "image/png"))]
        path = httpx.post(url + "gradio_api/upload", files=files, headers={"X-Forwarded-For": FLOODER}).json()[0]
    data = [defaults.get(i) for i in dep["inputs"]]
    data[:2] = [{"path": path, "meta": {"_type": "gradio.FileData"}}, "mnist_vit"]
    counts: dict[str, int] = {}
    lock = threading.Lock()
    heavy.mark()
    until = time.time() + min(FLOOD_SECONDS, max_s)
    threads = [
        threading.Thread(target=_maps_loop, args=(url, dep["id"], data, uuid.uuid4().hex, until, counts, lock))
        for _ in range(n)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max_s + 60)
    return {**counts, "sent": sum(counts.values())}, f"{n} sessions on one address for {FLOOD_SECONDS:.0f} s"


ATTACKS = {"classroom": (classroom, 30), "address_flood": (address_flood, 60)}
