"""App round trip vs bare extraction: one `/attention_maps` request at 480 px on CPU.

    python -m bench.bench_app_roundtrip [--repeats 25] [--image examples/photos/chelsea.jpg] [--idle-cpu]

The app runs as users run it, `python app.py`, in its own process; this process is the client.
Times (median of --repeats rounds, calls interleaved, after one warm-up each):
  bare  = attention_maps(load_vit("dino_vits16"), image, resolution=480), here (no server in this process)
  trip  = gradio_client `predict(image, model="dino_vits16", resolution="480", api_name="/attention_maps")`:
          upload, queue, forward pass, the overlays drawn onto one contact-sheet PNG, the .npz of raw
          arrays, and the client's download of both files (gradio_client's default);
  ctx   = the same with `Client(ssl_verify=ssl.create_default_context())`: one TLS context for all
          requests (gradio_client's default builds an httpx client, loading the CA bundle, per request);
  urls  = the same with `Client(download_files=False)` (the client gets the files' URLs);
  floor = a `/calculate` call on 1x1 matrices: gradio_client's own cost per call on this machine.
and prints ratio = trip / bare (target <= 1.5: rendering must not dominate), with the median of
the per-round ratios (each trip over the bare call just before it) and its 90% bootstrap interval,
as a check on this noisy machine. The server's own forward and drawing times (the answer's
`forward_ms`, `render_ms`) split the overhead into the app's drawing and the rest.
The medians end as a Markdown block for the docs (bench/blocks.py). --idle-cpu also measures, after the timings, the
CPU an idle `python app.py` uses over 10 s (Gradio's queue looks for jobs every 1 ms).

When the real DINO ViT-S/16 weights are not in the HF cache, it builds a temporary HF cache
holding a *random-weight* `vit_small_patch16_224.dino` in the hub's layout (same architecture,
same token count, same cost) and runs offline; the output says which.
"""

from __future__ import annotations

import argparse
import os
import random
import ssl
import statistics
import time
from pathlib import Path

from bench.common import (
    PHOTO,
    app_env,
    cpu_seconds,
    interleaved_times,
    markdown_table,
    offline_dino,
    readme_block,
    start_app,
)


def idle_cpu(env: dict[str, str], seconds: float = 10) -> float:
    """CPU time an idle `python app.py` uses per second of wall time (1.0 = one core), after it settles."""
    with start_app(env) as app:
        time.sleep(3)
        c0 = cpu_seconds(app.proc.pid)
        time.sleep(seconds)
        return (cpu_seconds(app.proc.pid) - c0) / seconds


def paired_median(ratios: list[float], draws: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Median of per-round ratios with a 90% bootstrap interval (rounds resampled with replacement)."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(draws))
    return statistics.median(ratios), meds[int(0.05 * draws)], meds[int(0.95 * draws) - 1]


def trip_table(medians: dict[str, float]) -> str:
    """{what: median seconds}, the bare call first, as a Markdown table with each one's ratio to it."""
    bare = next(iter(medians.values()))
    header = ["what (medians of interleaved rounds)", "ms", "/ bare"]
    return markdown_table(header, [(k.strip(), f"{v * 1e3:.0f}", f"{v / bare:.2f}") for k, v in medians.items()])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--image", default=str(PHOTO))
    ap.add_argument("--idle-cpu", action="store_true", help="also measure an idle server's CPU")
    args = ap.parse_args()

    _, weights = offline_dino("bench-roundtrip")  # this process's environment, so the app's too
    env = app_env("bench-roundtrip", offline=False)

    import torch
    from gradio_client import Client, handle_file

    from attention import attention_maps, load_vit

    model = load_vit("dino_vits16", device="cpu")
    res = attention_maps(model, args.image, resolution=480)

    app = start_app(env)
    url = app.url
    infos: list[dict] = []  # the default client's answers: the server's own forward and render times
    infos_ctx: list[dict] = []  # the same from the client with one TLS context
    bare_fwd: list[float] = []  # the bare calls' own forward times
    try:
        fetching, linking = Client(url, verbose=False), Client(url, verbose=False, download_files=False)
        # gradio_client hands `ssl_verify` to httpx as `verify`, which also takes an SSLContext: one context
        # built once, instead of the CA bundle loaded again for each of a call's HTTP requests
        reusing = Client(url, verbose=False, ssl_verify=ssl.create_default_context())

        def call(client):
            return client.predict(
                handle_file(args.image), model="dino_vits16", resolution="480", api_name="/attention_maps"
            )

        fns = [
            lambda: bare_fwd.append(attention_maps(model, args.image, resolution=480).seconds),
            lambda: infos.append(call(fetching)[2]),
            lambda: infos_ctx.append(call(reusing)[2]),
            lambda: call(linking),
            lambda: linking.predict("1", "1", "1", api_name="/calculate"),
        ]
        runs = interleaved_times(fns, args.repeats)
        sheet, npz, info = call(fetching)
    finally:
        app.stop()
    infos, infos_ctx, bare_fwd = infos[1:], infos_ctx[1:], bare_fwd[1:]  # drop the warm-up calls
    bare, trip, trip_ctx, trip_urls, floor = (statistics.median(ts) for ts in runs)
    pair, lo, hi = paired_median(
        [t / b for t, b in zip(runs[1], runs[0])]
    )  # each trip over the bare call just before it
    pair_ctx = statistics.median(t / b for t, b in zip(runs[2], runs[0]))
    fwd, render = (statistics.median(i[k] for i in infos) / 1000 for k in ("forward_ms", "render_ms"))
    gh, gw = res.grid

    def ms(s):
        return f"{s * 1000:.0f} ms"

    print(f"weights: {weights}")
    print(
        f"input: {Path(args.image).name} -> {res.image.size[0]}x{res.image.size[1]} px, grid {gh}x{gw} "
        f"= {gh * gw} patches, {res.maps.shape[0]} heads; torch threads {torch.get_num_threads()}; "
        f"per request: a {os.path.getsize(sheet) / 1e6:.2f} MB sheet of {len(info['tiles'])} overlays "
        f"+ a {os.path.getsize(npz) / 1e6:.1f} MB .npz of raw arrays"
    )
    print(f"medians of {args.repeats} interleaved rounds:")
    print(f"  bare attention_maps (this process, no server in it): {ms(bare)}")
    print(f"  app round trip, gradio_client's default Client (fetches both files): {ms(trip)}")
    print(
        f"    in the server: forward {ms(fwd)} (the bare call's: {ms(statistics.median(bare_fwd))}), "
        f"drawing + files {ms(render)} (info's forward_ms, render_ms)"
    )
    print(
        f"    overhead over bare: {ms(trip - bare)} = the app's drawing {ms(render)} "
        f"+ Gradio, gradio_client and the 2 cores shared with the client {ms(trip - bare - render)}"
    )
    print(
        f"  same, Client(ssl_verify=<one SSLContext>): {ms(trip_ctx)} "
        f"(the client's CA loading costs {ms(trip - trip_ctx)} per call); server forward "
        f"{statistics.median(i['forward_ms'] for i in infos_ctx):.0f} ms"
    )
    print(f"  same, Client(download_files=False) (gets the files' URLs): {ms(trip_urls)}")
    print(f"  gradio_client floor, a 1x1 /calculate call: {ms(floor)}")
    print(f"bare calls vary by {max(runs[0]) / min(runs[0]):.2f}x (slowest / fastest) on this machine in this run")
    print(
        f"ratio (default client) = {trip / bare:.2f} (target <= 1.5); median of per-round ratios {pair:.2f} "
        f"(90% bootstrap interval {lo:.2f}-{hi:.2f})"
    )
    print(f"ratio (reused TLS context) = {trip_ctx / bare:.2f}; per-round {pair_ctx:.2f}")
    print(f"ratio (URLs, no download) = {trip_urls / bare:.2f}")
    print(f"the app's drawing alone: {render / bare:.3f} of bare")
    medians = {
        "bare `attention_maps` (no server)": bare,
        "round trip, default `Client`": trip,
        "  in the server: forward": fwd,
        "  in the server: drawing + files": render,
        "round trip, `Client(ssl_verify=<one SSLContext>)`": trip_ctx,
        "round trip, `Client(download_files=False)`": trip_urls,
        "`gradio_client` floor (1x1 `/calculate`)": floor,
    }
    print(readme_block("bench_app_roundtrip", "trip", trip_table(medians)))
    if args.idle_cpu:
        print(f"idle server CPU, share of one core over 10 s: {idle_cpu(env):.1%}")


if __name__ == "__main__":
    main()
