"""Attention Explorer: a Gradio app that makes attention visible.

Thin by design: this file builds the UI, one tab per section, and wires it to the
`attention` package, which holds all the logic and knows nothing of Gradio.
`demo` is built at module level (tests import it); it is launched only under __main__.
"""

from __future__ import annotations

import functools
import os

import gradio as gr

import attention
from attention.errors import AttentionError


def user_errors(fn):
    """Show the package's typed errors as a `gr.Error` with their message (never a traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AttentionError as e:
            raise gr.Error(str(e), print_exception=False) from None

    return wrapper


# ----- ViT attention tab -----------------------------------------------------------------
def vit_tab() -> None:
    gr.Markdown("ViT attention maps: coming in the ViT tab issue.")


# ----- end ViT attention tab -------------------------------------------------------------


# ----- MNIST retrieval tab ---------------------------------------------------------------
def retrieval_tab() -> None:
    gr.Markdown("MNIST retrieval by attention: coming in the retrieval issue.")


# ----- end MNIST retrieval tab -----------------------------------------------------------


# ----- Q/K/V calculator tab --------------------------------------------------------------
def calculator_tab() -> None:
    gr.Markdown("Q/K/V calculator: coming in the calculator issue.")


# ----- end Q/K/V calculator tab ----------------------------------------------------------


with gr.Blocks(title="Attention Explorer") as demo:
    gr.Markdown("# Attention Explorer\nSee what attention looks at: in vision transformers, in a digit database, and step by step.")
    with gr.Tab("ViT attention maps", id="vit"):
        vit_tab()
    with gr.Tab("MNIST retrieval", id="retrieval"):
        retrieval_tab()
    with gr.Tab("Q/K/V calculator", id="calculator"):
        calculator_tab()

demo.queue(default_concurrency_limit=2)  # 2 cores: two requests compute at once, the rest wait


if __name__ == "__main__":
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
