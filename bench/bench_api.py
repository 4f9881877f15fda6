"""Every API endpoint through gradio_client vs the same handler in this process: files, bytes, time.

    python -m bench.bench_api [--rounds 7] [--only /retrieval_trained /retrieval_sketch]

Starts `python app.py` as users run it, offline (HF_HUB_OFFLINE=1, an empty HF_HOME: the ViT model is
mnist_vit), on a free port; lists the endpoints with `Client.view_api`; then for each endpoint calls,
after one warm-up each, interleaved for --rounds rounds:
  in-process = the endpoint's own handler called in this process (no server, no HTTP, nothing copied);
  client     = gradio_client's default `Client(url).predict(...)`: upload, queue, answer, and the
               download of every file in the answer;
  ctx        = the same with `Client(ssl_verify=ssl.create_default_context())`: one TLS context for
               all requests (the default client builds an httpx client, loading the CA bundle, per request);
  http       = the same answer over Gradio's REST route (POST /gradio_api/call/<name>, read its event
               stream, GET every file) with one persistent httpx client: what the server itself costs.
It prints, per endpoint: files per answer, bytes per answer (the files plus the JSON of the rest), the
medians, and ratio = client / in-process (target <= 1.5). A streaming endpoint (/retrieval_retrain) is
timed to its last update. An endpoint with no sample inputs here is named at the end. Ends with the
table as a Markdown block for the docs (bench/blocks.py).
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import statistics
import sys
from collections.abc import Callable

from bench import common
from bench.common import app_env, interleaved_times, markdown_table, readme_block, start_app

DIGIT = str(common.DIGITS[3])
PHOTO = str(common.PHOTO)
SKETCH = str(common.DIGITS[7])
QKV = dict(Q="1 0 0; 0 1 0; 1 1 1", K="1 0 0; 0 1 0; 0 0 1; 0 0 0", V="0 1; 2 3; 4 5; 6 7")
XW = dict(X="1 0; 0 1; 1 1", W_q="1 0; 0 1", W_k="0 1; 1 0", W_v="1 1; 0 1")
STREAMS = {"/retrieval_retrain"}


class File(str):
    """A path sent as a file (gradio_client's handle_file; an upload over HTTP)."""


def editor(path: str) -> dict:
    return {"background": None, "layers": [], "composite": File(path)}


# endpoint: (positional args, keyword args) as a client sends them
SAMPLES: dict[str, tuple[list, dict]] = {
    "/attention_maps": ([File(DIGIT)], {"model": "mnist_vit"}),
    "/feature_maps": ([File(DIGIT)], {"model": "mnist_vit"}),
    "/retrieval_database": ([100, 42], {}),
    "/retrieval_hard": ([100, 42, 7, 0], {}),
    "/retrieval_soft": ([100, 42, 16, 0, 1.0], {}),
    "/retrieval_many": ([100, 42, 16, 0, 1.0, 16], {}),
    "/retrieval_trained": ([100, 42, 3], {}),
    "/retrieval_sketch": ([100, 42, editor(SKETCH)], {}),
    "/retrieval_retrain": (["lab", 1, 7], {}),
    "/calculate": ([], {**QKV, "mask_mode": "causal"}),
    "/calculate_from_x": ([], XW),
    "/patch_attention": ([File(PHOTO), 16, 4, 0, 10], {}),
}


def twins() -> dict[str, Callable]:
    """{endpoint: its handler called in this process with the sample's values (files as paths or arrays)}."""
    import numpy as np
    from PIL import Image

    from attention.ui.calculator import api as calculator_api
    from attention.ui.calculator import patches as calculator_patches
    from attention.ui.retrieval import api as retrieval_api
    from attention.ui.vit import api as vit_api
    from attention.ui.vit import layout as vit_layout

    d = vit_layout.VIT_DEFAULTS
    maps = vit_api.attention_maps_fn("mnist_vit", d)
    sketch = {"background": None, "layers": [], "composite": np.asarray(Image.open(SKETCH).convert("RGBA"))}
    out = {
        "/attention_maps": lambda: maps(DIGIT, "mnist_vit"),
        "/retrieval_database": lambda: retrieval_api.retrieval_database(100, 42),
        "/retrieval_hard": lambda: retrieval_api.retrieval_hard(100, 42, 7, 0),
        "/retrieval_soft": lambda: retrieval_api.retrieval_soft(100, 42, 16, 0, 1.0),
        "/retrieval_many": lambda: retrieval_api.retrieval_many(100, 42, 16, 0, 1.0, 16),
        "/retrieval_trained": lambda: retrieval_api.retrieval_trained(100, 42, 3),
        "/retrieval_sketch": lambda: retrieval_api.retrieval_sketch(100, 42, sketch),
        "/retrieval_retrain": lambda: list(retrieval_api.retrieval_retrain("lab", 1, 7)),
        "/calculate": lambda: calculator_api.qkv_calculate(**QKV, mask_mode="causal"),
        "/calculate_from_x": lambda: calculator_api.qkv_calculate_from_x(**XW),
        "/patch_attention": lambda: calculator_patches.qkv_patch_attention(PHOTO, 16, 4, 0, 10),
    }
    if hasattr(vit_api, "feature_maps_fn"):
        features = vit_api.feature_maps_fn("mnist_vit", d)
        out["/feature_maps"] = lambda: features(DIGIT, "mnist_vit")
    return out


def _sent(v, file: Callable):
    if isinstance(v, File):
        return file(str(v))
    if isinstance(v, dict):
        return {k: _sent(x, file) for k, x in v.items()}
    return v


def client_call(client, name: str):
    """The sample call through gradio_client (a stream is read to its end)."""
    from gradio_client import handle_file

    args, kwargs = SAMPLES[name]
    args, kwargs = [_sent(a, handle_file) for a in args], {k: _sent(v, handle_file) for k, v in kwargs.items()}
    if name in STREAMS:
        job = client.submit(*args, **kwargs, api_name=name)
        list(job)
        return job.outputs()[-1]
    return client.predict(*args, **kwargs, api_name=name)


def http_call(http, url: str, name: str, params: list[dict]):
    """The sample call over Gradio's REST route with one persistent httpx client: upload the files,
    POST /gradio_api/call/<name>, read the event stream to "complete", GET every file in the answer."""

    def upload(path: str) -> dict:
        with open(path, "rb") as f:
            r = http.post(url + "gradio_api/upload", files={"files": (os.path.basename(path), f)})
        return {"path": r.json()[0], "meta": {"_type": "gradio.FileData"}}

    args, kwargs = SAMPLES[name]
    data = []
    for i, p in enumerate(params):
        v = args[i] if i < len(args) else kwargs.get(p["parameter_name"], p.get("parameter_default"))
        data.append(_sent(v, upload))
    event = http.post(url + f"gradio_api/call{name}", json={"data": data}).json()["event_id"]
    kind, answer = None, None
    with http.stream("GET", url + f"gradio_api/call{name}/{event}") as r:
        for line in r.iter_lines():
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and kind in ("complete", "error"):
                answer = json.loads(line.split(":", 1)[1])
                break
    if kind != "complete":
        raise RuntimeError(f"{name}: {answer}")

    def fetch(v):
        if isinstance(v, dict) and v.get("url"):
            return http.get(v["url"]).content
        if isinstance(v, (list, dict)):
            for x in v.values() if isinstance(v, dict) else v:
                fetch(x)
        return None

    fetch(answer)
    return answer


def files_and_bytes(answer) -> tuple[int, int]:
    """(files, bytes) of a client's answer: every existing file path in it (galleries included), plus the
    JSON of the rest."""
    files, size = 0, 0

    def walk(v):
        nonlocal files, size
        if isinstance(v, str) and os.path.isfile(v):
            files, size = files + 1, size + os.path.getsize(v)
            return None
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    rest = walk(answer)
    return files, size + len(json.dumps(rest, default=str).encode())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", nargs="*", help="endpoints to measure (default: all)")
    args = ap.parse_args()
    env = app_env("bench-api")
    os.environ.update(HF_HUB_OFFLINE="1", HF_HOME=env["HF_HOME"])  # the in-process handlers see what the server sees
    import httpx
    from gradio_client import Client

    local = twins()
    app = start_app(env)
    url = app.url
    rows, missing = [], []
    try:
        plain = Client(url, verbose=False)
        shared = Client(url, verbose=False, ssl_verify=ssl.create_default_context())
        http = httpx.Client(timeout=120)
        api = plain.view_api(return_format="dict", print_info=False)["named_endpoints"]
        for name, spec in api.items():
            if args.only and name not in args.only:
                continue
            if name not in SAMPLES or name not in local:
                missing.append(name)
                continue
            files, size = files_and_bytes(client_call(plain, name))
            fns = [
                local[name],
                lambda name=name: client_call(plain, name),
                lambda name=name: client_call(shared, name),
                lambda name=name, spec=spec: http_call(http, url, name, spec["parameters"]),
            ]
            medians = [statistics.median(ts) for ts in interleaved_times(fns, args.rounds)]
            rows.append((name, files, size, *medians))
            print(f"  measured {name}", file=sys.stderr)
    finally:
        app.stop()

    print(f"medians of {args.rounds} interleaved rounds; ratio = client / in-process (target <= 1.5)")
    cols = ("files", "bytes", "in-process", "client", "ctx", "http", "ratio", "ctx", "http")
    print(f"{'endpoint':<22}" + "".join(f"{c:>{w}}" for c, w in zip(cols, (6, 10, 12, 9, 8, 8, 8, 7, 7))))
    for name, files, size, t_local, t_client, t_ctx, t_http in rows:
        times = "".join(f"{t * 1000:>{w - 2}.0f}ms" for t, w in zip((t_local, t_client, t_ctx, t_http), (12, 9, 8, 8)))
        ratios = "".join(f"{t / t_local:>{w}.2f}" for t, w in zip((t_client, t_ctx, t_http), (8, 7, 7)))
        print(f"{name:<22}{files:>6}{size:>10,}{times}{ratios}")
    if missing:
        print(f"no sample inputs here for: {', '.join(missing)} (add them to SAMPLES and twins())")
    print(readme_block("bench_api", "endpoints", endpoints_table(rows)))


def endpoints_table(rows: list[tuple[str, int, int, float, float, float, float]]) -> str:
    """(endpoint, files, bytes, in-process s, client s, ctx s, http s) per row as a Markdown table."""
    header = ["endpoint", "files", "bytes", "in-process ms", "client ms", "ctx ms", "http ms", "client / in-process"]
    return markdown_table(
        header,
        [
            (
                f"`{name}`",
                files,
                f"{size:,}",
                *(f"{t * 1e3:.0f}" for t in (local, client, ctx, http)),
                f"{client / local:.2f}",
            )
            for name, files, size, local, client, ctx, http in rows
        ],
    )


if __name__ == "__main__":
    main()
