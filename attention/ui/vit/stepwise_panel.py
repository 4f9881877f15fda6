"""The ViT tab's "Step by step" panel: the chosen head's row for the chosen query, from the visitor's
kept pass (`stepwise.explain_row`, no new forward): the map at a temperature, the neuron view of the
selected key (click a patch of the panel's map to select it), the table of keys; "Open in the calculator"
(its Q, K, V) and "Export this view" (one self-contained HTML file). Its endpoints: `stepwise_api`.
"""

from __future__ import annotations

import gradio as gr

from attention.errors import AttentionError
from attention.ui.common.admit import who
from attention.ui.common.components import queue_share, slider, user_errors
from attention.ui.vit.fields import FITTED, ROLLOUT_QUEUE, on_screen
from attention.vit.draw import frames as vit_frames
from attention.vit.draw import stepwise_html
from attention.vit.draw import views as vit_views
from attention.vit.draw.stepwise_html import panel_html, stepwise_map
from attention.vit.engine import stepwise
from attention.vit.engine.query import label as query_label
from attention.vit.serve import inputs as vit_inputs
from attention.vit.serve import rollouts

FAST = dict(show_progress="minimal", api_visibility="private")
HEAVY = dict(FAST, validator=queue_share())
PANELS: list[StepwisePanel] = []  # the panel of the app being built (`open_in_calculator` wires the last)
CALC_LABEL = "Q, K, V directly"  # the calculator's direct mode (`calculator.form.MODE_LABELS`)
TO_CALCULATOR_TAB = """() => { const b = [...document.querySelectorAll('button[role="tab"]')]
  .find((e) => e.textContent.trim().startsWith('Q/K/V calculator')); if (b) b.click(); }"""


def explain(p, qr, qc, lay, hd, k, temperature, key) -> tuple[stepwise.RowSteps, object]:
    """The steps of the visitor's row and the pass seen from its query (for the map)."""
    q = vit_inputs.parse_query(qr, qc)
    s = stepwise.explain_row(p, query=q, layer=lay, head=hd, k=k, key=key, temperature=temperature)
    return s, p.at(s.query, s.layer)


def calculator_about(s: stepwise.RowSteps, folded: str) -> str:
    """The calculator's text after "Open in the calculator": where Q, K, V come from, what its output equals."""
    rows = " · ".join(f"{m} {n}" for m, n in enumerate(s.names))
    bias = {
        "": "",
        "column": " K's last column is the model's position bias divided by the scale (Q's is 1), so the scores "
        "include it.",
        "along q": " The model's position bias is carried in K, moved along q, so the scores include it.",
    }[folded]
    t = "" if s.temperature == 1 else f" at temperature {s.temperature:g} (the scale is divided by it)"
    return (
        f"**From the ViT tab:** Q is the query vector q_i of {query_label(s.query)}, layer {s.layer}, head {s.head}; "
        f"K and V are the keys and values of its {len(s.names)} kept keys, as the model's attention kernel got them. "
        f"Rows of K and V: {rows}.{bias} The scale is the model's ({s.scale:.6g}){t}.\n\n"
        f"**Its output equals the head's output row restricted to these {len(s.names)} keys** (softmax over them "
        "only, then their values mixed); with every key kept it would be the head's output itself."
    )


class StepwisePanel:
    """The panel's components, laid out in the tab's `steps_slot`; `follow` wires it to the main view."""

    def __init__(self, vit_pass, fit):
        self.vit_pass, self.fit = vit_pass, fit
        self.open = gr.State(False)
        self.key = gr.State(None)  # the selected key: [row, col] of a patch, a token name, or None (top patch)
        with gr.Accordion(
            "Step by step: why this head looks where it does (q · k, scale, softmax)",
            open=False,
            elem_id="vit-steps-panel",
        ) as self.acc:
            gr.Markdown(
                "The chosen head's row for the query, from your pass: **q_i** against the keys of the prefix tokens "
                "and the top patches, each score = q_i · k_j × scale (+ the model's position bias), then softmax. "
                "Click a patch of this map to select its key; move the temperature to sharpen or flatten the row.",
                elem_id="vit-steps-help",
            )
            with gr.Row(equal_height=False):
                with gr.Column(scale=5, min_width=260):
                    self.map = gr.Image(
                        show_label=False, format="png", interactive=False, elem_id="vit-steps-map", buttons=[]
                    )
                    self.temperature = slider(
                        0.05,
                        5.0,
                        value=stepwise.TEMPERATURE,
                        step=0.05,
                        label="Softmax temperature",
                        info="1 = the model; lower sharpens, higher flattens",
                        elem_id="vit-steps-temperature",
                    )
                    self.k = slider(
                        1, stepwise.MAX_K, value=stepwise.K, step=1, label="Top patches kept", elem_id="vit-steps-k"
                    )
                    self.calc_btn = gr.Button("Open in the calculator", size="sm", elem_id="vit-steps-calc")
                    self.export_btn = gr.Button(
                        "Export this view: one HTML file (map, tiles, step by step)",
                        size="sm",
                        elem_id="vit-export-btn",
                    )
                    self.export_file = gr.File(
                        label="Self-contained HTML: opens with no server", visible=False, elem_id="vit-export"
                    )
                with gr.Column(scale=7, min_width=280):
                    self.html = gr.HTML("", elem_id="vit-steps")
        PANELS.append(self)

    def inputs(self, m) -> list:
        return [self.open, m.image, m.model, m.resolution, m.qrow, m.qcol, m.layer, m.head, m.alpha, m.cmap]

    def _steps(self, img, mdl, res, qr, qc, lay, hd, st, k, temp, key, gd=None):
        """The step by step of the main view's head; `gd`: its accepted view (`fields.on_screen`), trusted
        when it is the one of these fields' pass, else the fields are fitted (`fit`, parsing them)."""
        p = self.vit_pass(img, mdl, res, state=st)
        seen = on_screen(gd, img, mdl, res)
        lay, hd, qr, qc = self.fit(p, st, lay, hd, qr, qc) if seen is None else (seen[k] for k in FITTED)
        s, r = explain(p, qr, qc, lay, hd, k, temp, key)
        return p, s, r

    def draw(self, is_open, img, mdl, res, qr, qc, lay, hd, al, cm, st, k, temp, key, gd=None):
        """The panel's map and text (skipped while closed); a refusal (the pooling head's query) is shown in it."""
        if not is_open:
            return gr.skip(), gr.skip()
        try:
            p, s, r = self._steps(img, mdl, res, qr, qc, lay, hd, st, k, temp, key, gd)
        except AttentionError as e:
            return None, f"<p>⚠️ {e}</p>"
        return stepwise_map(r, s, al, cm), panel_html(s, p.model)

    def follow(self, events: list, m) -> None:
        """Redraw after each of `events` (the key back to the top patch), on the temperature, k, a click."""
        ins = [*self.inputs(m), m.state, self.k, self.temperature, self.key, m.good]
        outs = [self.map, self.html]
        for ev in events:
            ev.success(lambda: None, None, self.key, queue=False, api_visibility="private").then(
                self.draw, ins, outs, **FAST
            )
        for c in (self.temperature, self.k):
            c.input(user_errors(self.draw), ins, outs, trigger_mode="always_last", **FAST)

        def pick(img, mdl, res, qr, qc, lay, st, evt: gr.SelectData):
            p = self.vit_pass(img, mdl, res, state=st)
            lay, _, qr, qc = self.fit(p, st, lay, 0, qr, qc)
            r = p.at(vit_inputs.parse_query(qr, qc), lay)
            return list(vit_views.patch_at(*evt.index, r))

        self.map.select(
            user_errors(pick), [m.image, m.model, m.resolution, m.qrow, m.qcol, m.layer, m.state], self.key, **FAST
        ).success(self.draw, ins, outs, **FAST)
        self.acc.expand(lambda: True, None, self.open, queue=False, api_visibility="private").then(
            user_errors(self.draw), ins, outs, **HEAVY
        )
        self.acc.collapse(lambda: False, None, self.open, queue=False, api_visibility="private")

        @user_errors
        def export(img, mdl, res, qr, qc, lay, vw, hd, thr, al, cm, st, k, temp, key):
            p = self.vit_pass(img, mdl, res, state=st)
            lay, hd, qr, qc = self.fit(p, st, lay, hd, qr, qc)
            q = vit_inputs.parse_query(qr, qc)
            v = vit_frames.ViewSpec(query=q, layer=lay, view=vw, threshold=thr, alpha=al, cmap=cm)
            return gr.update(value=str(export_view(p, v, hd, k, temp, key)), visible=True)

        ex_ins = [m.image, m.model, m.resolution, m.qrow, m.qcol, m.layer, m.view, m.head, m.threshold]
        ex_ins += [m.alpha, m.cmap, m.state, self.k, self.temperature, self.key]
        self.export_btn.click(export, ex_ins, self.export_file, **HEAVY, **ROLLOUT_QUEUE)
        self.main = m


def export_view(p, v: vit_frames.ViewSpec, head: int, *knobs, **options):
    """`stepwise_html.export_view` for a visitor: a heavy rollout first computed in the heavy lane, in their turn
    (`rollouts.ready`), never in this handler's worker."""
    rollouts.ready(p, v, who())
    return stepwise_html.export_view(p, v, head, *knobs, **options)


def open_in_calculator(calc: dict) -> None:
    """Wire the last built panel's "Open in the calculator" to the calculator's form `calc`
    (`calculator.tab.build`): Q, K, V, one head, the model's scale (custom), no mask; then the calculator's own
    calculation, and its tab shown."""
    if not PANELS:
        return
    panel = PANELS[-1]
    m = panel.main
    tables, texts = calc["tables"], calc["texts"]

    @user_errors
    def fill(img, mdl, res, qr, qc, lay, hd, st, k, temp, key):
        _, s, _ = panel._steps(img, mdl, res, qr, qc, lay, hd, st, k, temp, key)
        form = stepwise.calculator_form(s)
        out = {calc["mode"]: CALC_LABEL, calc["edit_as"]: "Tables", calc["use_wo"]: False, calc["preset"]: None}
        out |= {calc["about"]: calculator_about(s, form["folded"]), calc["heads"]: 1}
        out |= {calc["scale_mode"]: "custom", calc["scale"]: form["settings"]["scale"], calc["mask_mode"]: "none"}
        out |= {calc["dropout"]: 0.0}
        for n, cells in form["matrices"].items():
            heads = [str(j) for j in range(len(cells[0]))]
            if n in ("Q", "K") and form["folded"] == "column":
                heads[-1] = "bias"
            out[tables[n]] = gr.Dataframe(value=cells, headers=heads)
            out[texts[n]] = "\n".join(" ".join(r) for r in cells)
        return out

    ins = [m.image, m.model, m.resolution, m.qrow, m.qcol, m.layer, m.head, m.state, panel.k, panel.temperature]
    ins.append(panel.key)
    outs = [calc[c] for c in ("mode", "edit_as", "use_wo", "preset", "about", "heads", "scale_mode", "scale")]
    outs += [calc["mask_mode"], calc["dropout"], *tables.values(), *texts.values()]
    ev = panel.calc_btn.click(fill, ins, outs, **HEAVY)
    calc["calculate"](ev.success)
    ev.success(None, None, None, js=TO_CALCULATOR_TAB, queue=False, api_visibility="private")
