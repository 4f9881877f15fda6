"""The MNIST retrieval tab's pieces of layout: how its pictures and plots are shown, and the trained
section's components (the query digit, the sketchpad, both models' answers, retraining a copy).
`retrieval.tab` lays out the other sections and wires the events."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import gradio as gr

from attention.ui.common.components import kept_state, number, sketchpad

# Gradio's sketchpad opens on its image tool: a drag then selects the "select the draw tool" text
# instead of drawing, and "Clear canvas" puts it back there. When the trained section first shows and
# after every clear, pick the brush for the visitor (no Gradio parameter sets the starting tool; "Brush"
# and "Clear canvas" are the tool buttons' labels) and keep text unselectable.
BRUSH_FIRST = """
let tries = 0;
const pick = () => {
  const brush = document.querySelector('#retrieval-sketch button[aria-label="Brush"]');
  if (brush) {
    brush.click();
    window.retrievalBrushPicks = (window.retrievalBrushPicks || 0) + 1;  // the brush is ready (tests wait on it)
  } else if (tries++ < 100) setTimeout(pick, 100);
};
pick();
if (!window.retrievalBrush) {  // once per page: the clear button is re-rendered, the document is not
  window.retrievalBrush = true;
  document.addEventListener("click", (e) => {
    if (e.target.closest?.('#retrieval-sketch button[aria-label="Clear canvas"]')) setTimeout(pick, 150);
  }, true);
}
"""
# The top-10 galleries: 5 a row where they fit, else 3 (Gradio's fixed 100 px columns would overflow a
# phone and hide #4 and #5), and on a phone as tall as their rows.
TRAINED_CSS = """<style>
#retrieval-sketch, #retrieval-sketch * { user-select: none; -webkit-user-select: none; }
#retrieval-top10-lab .grid-container, #retrieval-top10-cnn .grid-container {
  grid-template-columns: repeat(auto-fill, minmax(max(84px, 18%), 1fr)) !important;
}
@media (max-width: 640px) {
  #retrieval-top10-lab, #retrieval-top10-cnn, #retrieval-top10-lab .grid-wrap, #retrieval-top10-cnn .grid-wrap {
    height: auto !important;
  }
}
</style>"""
HARD_INTRO = (
    "Every item *i* gets the one-hot key e_i; keys and values are shuffled together. The query "
    "is e_index, so QK^T is 1 at the one row holding item *index* and 0 elsewhere. That vector is "
    "already a valid weighting (non-negative, sums to 1), so **no softmax is needed**: softmax "
    "would give that row only e/(e+N-1) of the weight and blur the answer. The retrieved image "
    "equals the database image exactly."
)
SOFT_INTRO = (
    "A random query (1 × d) and random keys (N × d): weights = softmax(scale · QK^T), retrieved = "
    "weights · V, a blurry average of many digits. Raise the scale: the softmax sharpens toward "
    "hard attention (one digit); scale 0 averages all of them equally."
)
MANY_INTRO = (
    "num_q random queries at once (Q is num_q × d; the keys, d and seed of the soft tab): one "
    "softmax per row of scale · QK^T, one retrieval per query. At scale 0 every query gets the same "
    "uniform weights, so every retrieval is the same blur."
)
TRAINED_INTRO = (
    "Two trained models look up a query digit in the database above. <b>lab</b>: the lab's Linear(784, 32) "
    "embedding and one attention head, trained to reproduce the query (MSE). <b>cnn</b>: a small CNN and 4 heads, "
    "also rewarded when the weights, summed per label, pick the query's class, on a fresh database each step."
)
PICTURE = dict(format="png", buttons=["download", "fullscreen"])  # every picture: crisp pixels, no share button
PLOT = dict(format="png", buttons=[], show_label=False)  # a plot: its title is its label, no buttons over it


def picture(label: str, **kwargs) -> gr.Image:
    return gr.Image(None, label=label, **{**PICTURE, **kwargs})


@contextmanager
def section(title: str, tab_id: str, intro: str) -> Iterator[None]:
    """A section's tab (`title`, `tab_id`) opening with its `intro` (Markdown); its content goes inside."""
    with gr.Tab(title, id=tab_id):
        gr.Markdown(intro)
        yield


def details(title: str) -> gr.JSON:
    """A section's JSON facts, in a closed accordion titled `title`."""
    with gr.Accordion(title, open=False):
        return gr.JSON(show_label=False)


def plot(label: str, **kwargs) -> gr.Image:
    """A rendered plot (uint8 pixels from `plots`), scaled to fit its box: its text stays legible."""
    return gr.Image(None, label=label, **{**PLOT, **kwargs})


class TrainedSection:
    """The "4 · Trained" section's components, inside the caller's `gr.Tab`. `answers`: {model name:
    (retrieved picture, weights plot, top-10 gallery)}; `state`: the visitor's retrained copies."""

    def __init__(self):
        gr.HTML(f"<p>{TRAINED_INTRO}</p>", js_on_load=BRUSH_FIRST, head=TRAINED_CSS, elem_id="retrieval-trained-intro")
        self.state = kept_state()  # the visitor's retrained copies (about 0.5 MB)
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=240):
                self.q_index = number(0, precision=0, label="held-out query digit")  # its range: on first_screen
                self.pick_btn = gr.Button("Retrieve this digit", variant="primary", elem_id="retrieval-pick")
                self.rand_btn = gr.Button("Random held-out digit")
            with gr.Column(scale=3, min_width=300):
                self.sketch = sketchpad(
                    label="…or draw a digit",
                    canvas_size=(280, 280),
                    type="numpy",
                    brush=gr.Brush(default_size=18, colors=["#000000"], color_mode="fixed"),
                    elem_id="retrieval-sketch",
                    height=290,
                    layers=False,
                )
                self.sketch_btn = gr.Button("Retrieve my drawing", variant="primary", elem_id="retrieval-sketch-btn")
            self.q_img = picture(
                "query as the models see it (28 × 28)",
                height=220,
                scale=2,
                min_width=200,
                elem_id="retrieval-query",
            )
        self.answers = {}  # model name -> its (retrieved, weights plot, top-10 gallery) components
        with gr.Row(equal_height=False):
            for name, title in (
                ("lab", "lab model (Linear + 1 head, MSE)"),
                ("cnn", "cnn model (CNN + 4 heads, class-aware)"),
            ):
                with gr.Column(min_width=320):
                    gr.Markdown(f"### {title}")
                    with gr.Row(equal_height=True):
                        r_img = picture("retrieved", height=200, scale=1, min_width=140)
                        r_plot = plot("weights", height=200, scale=3, min_width=260)
                    r_gal = gr.Gallery(
                        label="top-10 matches (#rank · label · weight)",
                        columns=5,
                        rows=2,
                        format="png",
                        height=280,
                        object_fit="contain",
                        elem_id=f"retrieval-top10-{name}",
                        allow_preview=False,
                    )
                    self.answers[name] = (r_img, r_plot, r_gal)
        self.trained_json = details("details (top-10 with labels and weights, as JSON)")
        with gr.Accordion("Retrain your own copy (a few epochs, from scratch)", open=False):
            with gr.Row():
                self.rt_model = gr.Radio(["lab", "cnn"], value="lab", label="model")
                self.rt_epochs = number(2, precision=0, label="epochs (1 to 5, ~3 s each for lab, ~6 s for cnn)")
                self.rt_seed = number(1, precision=0, label="training seed")
                self.rt_btn = gr.Button("Retrain my copy", variant="primary")
                self.reset_btn = gr.Button("Back to the shipped models")
            self.rt_msg = gr.Markdown()
            # the run's progress bar here, above the live loss curve, not over it
            self.rt_progress = gr.Markdown("", elem_id="retrieval-rt-progress", min_height=48)
            self.rt_plot = plot("loss", height=260, elem_id="retrieval-rt-plot")
