"""A guided first visit of the ViT tab: five short steps through the start example, each one driving the
tab's real controls (query, view, layer, head, the step-by-step panel), skippable at any time and
remembered as done in this browser (localStorage: offered once), with a button to take it again. The offer is one
small line in place of the tab's intro; while the tour runs it is a bar at the bottom of the screen, and each step
scrolls what it asks for into view above the bar.
"""

from __future__ import annotations

import gradio as gr

from attention.errors import as_whole
from attention.ui.common.components import queue_share

DONE_KEY = "attention-tour-done"
STEPS = (
    (
        "Patches and tokens",
        "The model cut the picture into a grid of square **patches**; each patch is one token, and the model adds "
        "a **CLS** token in front (some models also registers). The large map shows where one token, the "
        "**query**, looks: here CLS, last layer, head 0. Bright = much attention.",
    ),
    (
        "One query and its keys",
        "Now the query is the patch under the cyan crosshair. Its row of attention gives every token (the "
        "**keys**) a weight; the weights sum to 1. **Click any patch of the large map** to make it the query.",
    ),
    (
        "Scores, scale, softmax",
        "The **Step by step** panel is open now: the query's vector q against each key's vector k, the "
        "products per dimension, the sum q · k, times the scale 1/√d, then softmax. Move the **temperature**: "
        "lower sharpens the map, higher flattens it. *Open in the calculator* redoes it by hand.",
    ),
    (
        "Every head",
        "Each head has its own q and k, so its own map: the tiles **Every head** (now head 1 is shown large). "
        "Click a tile to show that head large; the **Head** slider does the same.",
    ),
    (
        "Layers and rollout",
        "Each layer attends over the previous layer's tokens. **Rollout** (now shown) multiplies the layers' "
        "maps to follow attention from the first layer to this one. Move the **Layer** slider to compare. "
        "That's the tour: explore on your own.",
    ),
)
SET_DONE = f"(d) => {{ if (d) localStorage.setItem('{DONE_KEY}', '1'); }}"
# what each step is about, scrolled to the top of the screen once it is drawn; then the control the step asks the
# visitor to move (step 3: the temperature, step 5: the layer), if the tour bar (fixed at the bottom) covers it,
# scrolled up until it lies just above the bar: again whenever the page's height changes in the next 3 s (the
# step-by-step panel draws after the step shows, and pushed the temperature under the bar on a phone)
SCROLL = """(s) => { const id = ["vit-caption", "vit-caption", "vit-steps-panel", "vit-gallery",
  "vit-caption"][s]; const e = id && document.getElementById(id);
  if (e) e.scrollIntoView({block: "start", behavior: "instant"});
  const lift = () => {
    const want = document.getElementById(["", "", "vit-steps-temperature", "", "vit-layer"][s] || "-");
    const bar = document.getElementById("vit-tour-bar");
    if (want && bar) { const w = want.getBoundingClientRect(), b = bar.getBoundingClientRect();
      if (w.bottom > b.top - 8) window.scrollBy(0, w.bottom - (b.top - 8)); } };
  lift(); const watch = new ResizeObserver(lift); watch.observe(document.body);
  setTimeout(() => watch.disconnect(), 3000);
  document.body.dataset.tourShown = s; }"""
CSS = """
#vit-tour-bar { border: 1px solid #f97316; border-radius: 8px; background: var(--background-fill-primary, #fff);
  padding: 0 8px; gap: 2px 8px; flex-direction: row; flex-wrap: wrap; align-items: center; justify-content: flex-end; }
#vit-tour-bar > * { flex: 0 0 auto; width: auto; }
#vit-tour-bar > #vit-tour-text { flex: 1 1 300px; }
#vit-tour-bar p { margin: 1px 0; }
#vit-tour-bar:not(.vit-tour-running) { font-size: 0.9em; }
body:has(#vit-tour-bar:not(.vit-tour-running)) #vit-intro { display: none; }
#vit-tour-slot:not(:has(#vit-tour-bar)) { display: none; }
#vit-tour-bar.vit-tour-running { position: fixed; left: 50%; transform: translateX(-50%); bottom: 10px;
  z-index: 1000; width: min(760px, calc(100vw - 16px)); box-shadow: 0 4px 20px rgba(0, 0, 0, 0.3);
  border-width: 2px; padding: 8px 12px; max-height: 45vh; overflow-y: auto; }
#vit-tour-bar.vit-tour-running > #vit-tour-text { flex: 1 1 100%; }
"""
READ_DONE = f"() => localStorage.getItem('{DONE_KEY}') === '1'"


def _step(s: object) -> int:
    """The step a browser sent, as a step index -1..4 (anything else: -1, the offer)."""
    v = as_whole(s)
    return v if v is not None and -1 <= v < len(STEPS) else -1


def text(step: int) -> str:
    """The tour box's markdown at `step` (-1: the offer)."""
    if step < 0:
        return "**New here?** A 1-minute tour of this example, in five steps."
    title, body = STEPS[step]
    return f"**Step {step + 1} of {len(STEPS)}: {title}**\n\n{body}"


def controls(step: int, st, start_image: str, start_model: str, image, model) -> dict:
    """What step `step` sets in the tab (keys: image, model, qrow, qcol, view, layer, head, open): the start
    example and model at the first step, then the query, view, head and layer each step is about."""
    grid = st.grid if st is not None else None
    centre = (grid[0] // 2, grid[1] // 2) if grid else (None, None)
    depth = st.num_layers if st is not None else 1
    base = {"image": image, "model": model, "view": "heads", "layer": depth - 1, "head": 0, "open": False}
    if step == 0:
        return base | {"image": start_image, "model": start_model, "qrow": None, "qcol": None}
    q = {"qrow": centre[0], "qcol": centre[1]}
    return base | q | [{}, {}, {"open": True}, {"head": 1, "open": True}, {"view": "rollout", "open": True}][step]


def build(t, panel, start_image: str, start_model: str, then_update, demo: gr.Blocks | None) -> None:
    """The tour box in `t.tour_slot`, driving tab `t` (`layout.ViTTab`) and the step-by-step `panel`;
    `then_update(event)`: the tab's redraw after an event; `demo`: the app, whose load hides the box when the
    tour was done or skipped in this browser."""
    step = gr.Number(-1, visible="hidden", precision=0, elem_id="vit-tour-step")  # the browser reads it (scroll)
    with t.tour_slot:
        gr.HTML("", visible="hidden", head=f"<style>{CSS}</style>")  # display: none, its style in the head
        with gr.Column(elem_id="vit-tour-bar") as box:  # the offer in place of the intro; then a bar at the bottom
            md = gr.Markdown(text(-1), elem_id="vit-tour-text")
            back = gr.Button("Back", size="sm", visible=False, scale=0, min_width=80, elem_id="vit-tour-back")
            nxt = gr.Button(
                "Start the tour", size="sm", variant="primary", scale=0, min_width=130, elem_id="vit-tour-next"
            )
            skip = gr.Button("Skip", size="sm", scale=0, min_width=80, elem_id="vit-tour-skip")
        done = gr.Checkbox(False, visible="hidden", elem_id="vit-tour-done")
    with t.steps_slot:  # under the maps, beside the step by step: out of the first screen's way
        again = gr.Button("Take the guided tour", size="sm", visible=False, scale=0, elem_id="vit-tour-again")
    quick = dict(queue=False, api_visibility="private")
    fast = dict(show_progress="minimal", api_visibility="private")
    ins = [step, t.state, t.image, t.model]
    shown = [box, again, done, step, md, back, nxt, skip]
    driven = [t.image, t.model, t.qrow, t.qcol, t.view, t.layer, t.head, panel.acc, panel.open]
    last = len(STEPS) - 1

    def ended() -> list:  # the box gone, "Take the guided tour" shown, the tour remembered as done
        return [
            gr.update(visible=False, elem_classes=[]),
            gr.update(visible=True),
            True,
            -1,
            text(-1),
            gr.update(visible=False),
        ]

    def go(to: int, st, image, model) -> list:
        """Step `to` on screen and the tab's controls set for it; past the last step: the tour ended."""
        if to > last:
            return [*ended(), gr.update(value="Start the tour"), gr.update(value="Skip", visible=True)] + [
                gr.skip()
            ] * 9
        c = controls(to, st, start_image, start_model, image, model)
        return [
            gr.update(visible=True, elem_classes=["vit-tour-running"]),  # a bar fixed at the bottom of the screen
            gr.update(visible=False),
            gr.skip(),
            to,
            text(to),
            gr.update(visible=to > 0),
            gr.update(value="Finish" if to == last else "Next"),
            gr.update(value="Skip the tour", visible=to != last),
            *(c[n] for n in ("image", "model", "qrow", "qcol", "view", "layer", "head")),
            gr.update(open=c["open"]),
            c["open"],
        ]

    def redraw(ev) -> None:  # the tab's own redraw, then the panel's (it may have opened)
        then_update(ev).then(lambda: None, None, panel.key, **quick).then(
            panel.draw, None, [panel.map, panel.html], inputs_kwargs=panel.draw_inputs(panel.main), **fast
        ).then(None, step, None, js=SCROLL)

    redraw(nxt.click(lambda s, *a: go(_step(s) + 1, *a), ins, shown + driven, **fast, validator=queue_share()))
    redraw(back.click(lambda s, *a: go(max(0, _step(s) - 1), *a), ins, shown + driven, **fast, validator=queue_share()))
    skip.click(lambda: [*ended(), gr.update(value="Start the tour"), gr.update(value="Skip")], None, shown, **quick)
    redraw(
        again.click(lambda *a: go(0, *a), [t.state, t.image, t.model], shown + driven, **fast, validator=queue_share())
    )
    done.change(None, done, None, js=SET_DONE)
    if demo is not None:
        demo.load(None, None, done, js=READ_DONE).then(
            lambda d: (gr.update(visible=not d), gr.update(visible=bool(d))), done, [box, again], **quick
        )
