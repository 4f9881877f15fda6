"""Attention Explorer: a Gradio app that makes attention visible.

This file only composes: each tab is built by its own module in `attention/ui/`, over the
`attention` package, which holds all the logic and knows nothing of Gradio. `demo` is built at
module level (tests import it); it is launched only under __main__, with `LAUNCH`.
"""

from __future__ import annotations

import logging
import sys
import warnings

import gradio as gr

try:
    from attention.config import SETTINGS  # every setting, read once
except ValueError as e:  # attention.config.ConfigError: a bad ATTENTION_* value, named in the message
    raise SystemExit(f"Attention Explorer cannot start: {e}") from None
from attention.crowd.memory import freeze_startup
from attention.ui import APP_CSS
from attention.ui.calculator import tab as calculator_tab
from attention.ui.common import server
from attention.ui.retrieval import tab as retrieval_tab
from attention.ui.video import tab as video_tab
from attention.ui.vit import tab as vit_tab
from attention.ui.vit.stepwise_panel import open_in_calculator
from attention.vit.models.own_checkpoint import serve_args

if __name__ == "__main__":
    # the package's own fallbacks and refusals at INFO; other libraries' (each HTTP request) at WARNING
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("attention").setLevel(logging.INFO)
    serve_args(sys.argv[1:])  # `python app.py --model PATH --arch NAME`: the operator's checkpoint, the default
    server.memory_upkeep(SETTINGS)  # 2 malloc arenas; every 10 s: the stores' clocks, freed memory returned

# Files Gradio serves (sheets, .npz, plots) are deleted every 5 minutes once older than
# ATTENTION_FILE_TTL seconds, so its temp dir is bounded by traffic x age.
with gr.Blocks(title="Attention Explorer", fill_width=True, delete_cache=(300, int(SETTINGS.cache_age))) as demo:
    gr.Markdown(
        "# Attention Explorer\nSee what attention looks at: in vision transformers, in a digit database, "
        "and step by step. Layers, heads, rows, columns and indices count from 0 in every tab."
    )
    with gr.Tab("ViT attention", id="vit"):
        with gr.Tab("Image", id="vit-image"):
            vit_tab.build(demo)
        with gr.Tab("Video", id="vit-video"):
            video_tab.build()
    with gr.Tab("MNIST retrieval", id="retrieval") as retrieval:
        retrieval_tab.build(retrieval)
    with gr.Tab("Q/K/V calculator", id="calculator"):
        calculator = calculator_tab.build()
    open_in_calculator(calculator)  # the ViT tab's step by step lands in the calculator

demo.queue(default_concurrency_limit=SETTINGS.concurrency)  # 2 cores: two jobs compute at once, the rest wait

# What launch() needs wherever the app is served (here, tests, benches): the upload cap, how many
# sessions' state Gradio keeps (the oldest forgotten first), the API endpoints as MCP tools, the
# page-wide CSS (in the page's head from the start), and, as `app_kwargs`, the guard in front of
# Gradio's app (body sizes, session ids, per-client rates: attention/crowd/guard.py).
LAUNCH = server.LaunchKwargs(
    SETTINGS,
    demo,
    max_file_size=int(SETTINGS.max_upload_mb * 2**20),
    state_session_capacity=SETTINGS.max_sessions,
    mcp_server=SETTINGS.mcp,
    css=APP_CSS,
)

# Gradio warns at launch that a tool with a gr.State input gets the state's default under MCP: meant here.
# /retrieval_trained, /retrieval_sketch and /retrieval_retrain keep a visitor's retrained copies in the
# session (the page, or one gradio_client Client); an MCP call has no session, so it uses the shipped
# models, as their descriptions say.
warnings.filterwarnings("ignore", message="This MCP server includes a tool that has a gr.State input")

if __name__ == "__main__":
    freeze_startup()  # what the app built, out of the cycle collector's walk (the janitor's collections)
    demo.launch(server_name=SETTINGS.server_name, **LAUNCH)
