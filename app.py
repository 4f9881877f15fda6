"""Attention Explorer: a Gradio app that makes attention visible.

This file only composes: each tab is built by its own module in `attention/ui/`, over the
`attention` package, which holds all the logic and knows nothing of Gradio. `demo` is built at
module level (tests import it); it is launched only under __main__, with `LAUNCH`.
"""

from __future__ import annotations

import gradio as gr

from attention.config import SETTINGS
from attention.ui import APP_CSS, calculator_tab, retrieval_tab, video_tab, vit_tab

# Files Gradio serves (sheets, .npz, plots) are deleted every 5 minutes once older than
# ATTENTION_FILE_TTL seconds, so its temp dir is bounded by traffic x age.
with gr.Blocks(title="Attention Explorer", fill_width=True, delete_cache=(300, int(SETTINGS.cache_age))) as demo:
    gr.Markdown(
        "# Attention Explorer\nSee what attention looks at: in vision transformers, in a digit database, "
        "and step by step."
    )
    with gr.Tab("ViT attention", id="vit"):
        with gr.Tab("Image", id="vit-image"):
            vit_tab.build(demo)
        with gr.Tab("Video", id="vit-video"):
            video_tab.build(vit_tab.VIT_STARTUP)
    with gr.Tab("MNIST retrieval", id="retrieval") as retrieval:
        retrieval_tab.build(retrieval)
    with gr.Tab("Q/K/V calculator", id="calculator"):
        calculator_tab.build()

demo.queue(default_concurrency_limit=SETTINGS.concurrency)  # 2 cores: two jobs compute at once, the rest wait
# Gradio's queue looks for new jobs every 1 ms, which keeps an idle server busy on a small CPU
# (bench/bench_app_roundtrip.py --idle-cpu); every 10 ms costs a job at most 10 ms of waiting.
QUEUE_POLL = SETTINGS.queue_poll  # ATTENTION_QUEUE_POLL (Gradio's own: 0.001)
if hasattr(demo._queue, "sleep_when_free"):  # a private attribute of Gradio 6's Queue: set only if there
    demo._queue.sleep_when_free = QUEUE_POLL

# What launch() needs wherever the app is served (here, tests, benches): the upload cap, how many
# sessions' state Gradio keeps (the oldest forgotten first), the API endpoints as MCP tools, and the
# page-wide CSS (in the page's head from the start).
LAUNCH = dict(
    max_file_size=int(SETTINGS.max_upload_mb * 2**20),
    state_session_capacity=SETTINGS.max_sessions,
    mcp_server=SETTINGS.mcp,
    css=APP_CSS,
)

if __name__ == "__main__":
    demo.launch(server_name=SETTINGS.server_name, **LAUNCH)
