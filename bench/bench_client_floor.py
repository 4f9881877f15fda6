"""What gradio_client's default client adds to any call, whatever the app: the floor under
`python -m bench.bench_api`'s client / in-process ratios.

    python -m bench.bench_client_floor [--rounds 15]

Serves a bare Gradio app (no attention code) in its own process with two endpoints: /echo returns
its text, /wait sleeps the given seconds. For each, `Client(url).predict(...)` (the default client,
as bench_api uses it) against calling the same function in this process, interleaved. It prints the
client's added time and the ratio client / in-process, and the smallest in-process time for which
a ratio <= 1.5 is possible at all (2x the added time). gradio_client (2.x) posts each job with a
new httpx client (a new TLS context, the CA bundle loaded again) and polls its event queue every
50 ms (`utils.stream_sse_v1plus`): both are in the client, out of an app's reach. Ends with the table
as a Markdown block for the docs (bench/blocks.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import textwrap
import time

from bench.common import app_env, free_port, interleaved_times, markdown_table, readme_block, start_server

SERVER = textwrap.dedent(
    """
    import sys, time
    import gradio as gr

    def echo(text: str) -> str:
        return text

    def wait(seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    with gr.Blocks() as demo:
        t, n = gr.Textbox(), gr.Number()
        gr.Button("echo").click(echo, t, t, api_name="echo")
        gr.Button("wait").click(wait, n, n, api_name="wait")
    demo.queue().launch(server_port=int(sys.argv[1]), server_name="127.0.0.1", quiet=True)
    """
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    port = free_port()
    with start_server([sys.executable, "-c", SERVER, str(port)], port, app_env("bench-floor", offline=False)) as srv:
        from gradio_client import Client

        client = Client(srv.url, verbose=False)
        cases = [("/echo", "hello", lambda: "hello")] + [
            ("/wait", s, lambda s=s: time.sleep(s)) for s in (0.01, 0.05, 0.1, 0.2, 0.4)
        ]
        print(f"the default gradio_client vs the same function in-process; medians of {args.rounds} interleaved rounds")
        print(f"{'endpoint':14s} {'in-process s':>13s} {'client s':>9s} {'added s':>8s} {'ratio':>7s}")
        rows = []
        for name, arg, local in cases:
            remote = lambda a=arg, n=name: client.predict(a, api_name=n)  # noqa: E731
            inner, outer = map(statistics.median, interleaved_times([local, remote], args.rounds))
            rows.append((f"{name}({arg})", inner, outer))
            label = f"{name}({arg})"
            print(f"{label:14s} {inner:13.4f} {outer:9.3f} {outer - inner:8.3f} {outer / max(inner, 1e-9):7.2f}")
    floor = statistics.median(outer - inner for _, inner, outer in rows)
    print(f"the client adds {floor * 1000:.0f} ms to any call here (median over the rows), so client / in-process")
    print(f"<= 1.5 needs at least {2 * floor * 1000:.0f} ms of work in-process")
    print(readme_block("bench_client_floor", "floor", floor_table(rows)))


def floor_table(rows: list[tuple[str, float, float]]) -> str:
    """(call, in-process s, client s) per row as a Markdown table, with the added ms and the ratio."""
    header = ["call", "in-process ms", "client ms", "added ms", "client / in-process"]
    return markdown_table(
        header,
        [
            (
                name,
                f"{inner * 1e3:.1f}",
                f"{outer * 1e3:.0f}",
                f"{(outer - inner) * 1e3:.0f}",
                f"{outer / max(inner, 1e-9):.2f}",
            )
            for name, inner, outer in rows
        ],
    )


if __name__ == "__main__":
    main()
