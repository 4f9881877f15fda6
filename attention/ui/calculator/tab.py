"""The Q/K/V calculator tab: softmax(QK^T/sqrt(d))V step by step, and an image cut into patches."""

from __future__ import annotations

from importlib import resources

import gradio as gr

from attention.calculator import form as qkv_form
from attention.calculator import matrices as qkv_matrices
from attention.calculator import presets as qkv_presets
from attention.calculator import report as qkv
from attention.errors import AttentionError
from attention.ui.calculator import api as calculator_api
from attention.ui.calculator import edit as calculator_edit
from attention.ui.calculator import patches as calculator_patches
from attention.ui.common.components import QUIET, error, number, slider, user_errors

QKV_DIRECT, QKV_X = qkv_form.MATRICES[qkv.DIRECT], qkv_form.MATRICES[qkv.FROM_X]
QKV_TABLES, QKV_TEXT = "Tables", "Text"
QKV_CSS = "<style>" + (resources.files("attention.calculator") / "tab.css").read_text() + "</style>"
FAULT, STALE = ["qkv-fault"], ["qkv-stale"]  # classes (tab.css): the input to blame, results kept from before


def _qkv_table(a):
    """A Dataframe update showing matrix `a` (rows, cols) as editable text cells."""
    return gr.Dataframe(**qkv_form.table(a))


def build() -> dict:
    """The Q/K/V calculator tab, inside the caller's `gr.Tab`.

    Registers /calculate, /calculate_from_x, /patch_attention. Returns its form for other tabs to fill
    ("Open in the calculator", `stepwise_panel.open_in_calculator`): the components by name ("tables",
    "texts": name -> component; "about", "mode", "edit_as", "use_wo", "preset" and Settings' fields) and
    "calculate" (an event's `.then` -> the calculation, as the tab's own buttons run it)."""
    gr.Markdown(
        "Type small matrices and follow **softmax(Q Kᵀ / √d) V** step by step, per head, checked "
        "against PyTorch. Matrices: rows by newline or `;`, numbers by spaces or commas, or "
        "`[[1, 0], [0, 1]]`; up to 64 x 64."
    )
    presets = qkv_presets.PRESETS
    first = next(iter(presets.values()))
    start = qkv_form.first_matrices(presets)
    start_checks, start_notes, start_report = qkv.report(qkv.compute(first.matrices, first.settings, mode=first.mode))
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=460):
            with gr.Row():
                preset = gr.Dropdown(
                    list(presets), value=first.name, label="Preset", scale=3, min_width=250, elem_id="qkv-preset"
                )
                edit_as = gr.Radio(
                    [QKV_TABLES, QKV_TEXT], value=QKV_TABLES, label="Enter matrices as", scale=2, elem_id="qkv-edit-as"
                )
            about = gr.Markdown(first.description, elem_id="qkv-about")
            mode = gr.Radio(
                list(qkv_form.MODE_LABELS), value=next(iter(qkv_form.MODE_LABELS)), label="Mode", elem_id="qkv-mode"
            )
            tables, texts, boxes = {}, {}, {}
            for group in (QKV_DIRECT, QKV_X):
                visible = group == QKV_DIRECT
                with gr.Row(visible=visible, elem_classes=["qkv-matrices"]) as boxes[group, QKV_TABLES]:
                    for n in group:
                        tables[n] = gr.Dataframe(
                            **qkv_form.table(start[n]),
                            label=n,
                            type="array",
                            datatype="str",
                            interactive=True,
                            visible=n != "W_o",
                            min_width=110,
                            max_height=300,
                            elem_id=f"qkv-table-{n.lower()}",
                        )
                with gr.Row(visible=False) as boxes[group, QKV_TEXT]:
                    for n in group:
                        texts[n] = gr.Textbox(
                            qkv_matrices.format_matrix(start[n]),
                            label=n,
                            lines=4,
                            visible=n != "W_o",
                            min_width=180 if visible else 240,
                            elem_id=f"qkv-text-{n.lower()}",
                        )
            use_wo = gr.Checkbox(
                False, label="Output projection W_o (concatenated heads × W_o)", visible=False, elem_id="qkv-use-wo"
            )
            with gr.Row():
                heads = number(1, label="Heads", precision=0, minimum=1, maximum=64, min_width=80, elem_id="qkv-heads")
                scale_mode = gr.Radio(
                    list(qkv_form.SCALE_LABELS),
                    value="1/√d_head",
                    label="Scale",
                    min_width=200,
                    elem_id="qkv-scale-mode",
                )
                scale = number(1.0, label="Custom scale", min_width=90, interactive=False, elem_id="qkv-scale")
            with gr.Row():
                mask_mode = gr.Radio(
                    list(qkv_form.MASK_LABELS), value="none", label="Mask", min_width=200, elem_id="qkv-mask-mode"
                )
                mask = gr.Textbox(
                    "",
                    label="Custom mask (n x m, 1 = may attend, 0 = blocked)",
                    lines=2,
                    interactive=False,
                    elem_id="qkv-mask",
                )
            with gr.Row():
                dropout = slider(
                    0.0,
                    0.9,
                    value=0.0,
                    step=0.05,
                    label="Dropout on the weights (training only)",
                    elem_id="qkv-dropout",
                )
                seed = number(0, label="Dropout seed", precision=0, min_width=90, elem_id="qkv-seed")
            go = gr.Button("Calculate", variant="primary", elem_id="qkv-go")
        with gr.Column(scale=1, min_width=480):
            stale = gr.HTML("", visible=False, elem_id="qkv-stale-note")
            checks = gr.Markdown(start_checks, elem_id="qkv-checks")
            notes = gr.Markdown(start_notes, elem_id="qkv-notes")
            report = gr.HTML(start_report, elem_id="qkv-report", head=QKV_CSS)
    marked = gr.State([])  # the inputs outlined as at fault: matrix names or setting keys

    settings = {  # Settings' fields -> their inputs (the two modes show labels: qkv_form.read_settings)
        "heads": heads,
        "scale_mode": scale_mode,
        "scale": scale,
        "mask_mode": mask_mode,
        "mask": mask,
        "dropout": dropout,
        "seed": seed,
    }
    calc_inputs = {mode, use_wo, edit_as, marked, *tables.values(), *texts.values(), *settings.values()}
    blamable = {k: [c] for k, c in settings.items() if k not in qkv_form.LABELLED}  # the settings an error names
    blamable |= {n: [tables[n], texts[n]] for n in tables}  # a matrix: outlined in both editors

    def matrices(d, to=None):  # name -> value of the editors in use (or of the `to` ones)
        return {n: d[c] for n, c in (tables if (to or d[edit_as]) == QKV_TABLES else texts).items()}

    def values(d):  # Settings' fields -> the form's values
        return {k: d[c] for k, c in settings.items()}

    def outline(old, new):  # outline the inputs `new` (names), clear those of `old` no longer blamed
        out = {c: gr.update(elem_classes=[]) for f in old if f not in new for c in blamable.get(f, [])}
        return out | {c: gr.update(elem_classes=FAULT) for f in new for c in blamable.get(f, [])}

    @user_errors
    def qkv_ui_calculate(d):
        r = qkv_form.run_form(matrices(d), d[mode], qkv_form.read_settings(values(d)), d[use_wo])
        shown = qkv.report(r)
        out = {c: gr.update(value=v, elem_classes=[]) for c, v in zip((checks, notes, report), shown)}
        return out | {stale: gr.update(visible=False), marked: []} | outline(d[marked], [])

    def qkv_ui_recalculate(d):  # a table cell edited: the note over the results and the outline say what is
        try:  # wrong, no toast (a cell's edit can fire twice: two toasts would cover the note)
            return qkv_ui_calculate.__wrapped__(d)
        except AttentionError as e:
            raise error(e, visible=False) from None

    def qkv_ui_stale(d):  # after a failed calculation: blame its inputs, mark the old results as stale
        message, fields = qkv_form.diagnose(matrices(d), d[mode], values(d), d[use_wo])
        out = {c: gr.update(elem_classes=STALE) for c in (checks, notes, report)}
        return (
            out
            | {stale: gr.update(value=qkv.stale_html(message), visible=True), marked: list(fields)}
            | outline(d[marked], fields)
        )

    calc_outputs = [checks, notes, report, stale, marked, *dict.fromkeys(c for cs in blamable.values() for c in cs)]
    calc_quiet = dict(QUIET, show_progress_on=[report])

    def calculate(event, fn=qkv_ui_calculate, **kw):  # `event` runs the calculation; a failure marks the results stale
        event(fn, calc_inputs, calc_outputs, **kw, **calc_quiet).failure(
            qkv_ui_stale, calc_inputs, calc_outputs, **calc_quiet
        )

    def fill_mask(d):  # "custom" chosen with no mask yet: start from the causal pattern of the current shape
        m = qkv_form.custom_mask_start(d[mask_mode], d[mask], d[mode], matrices(d))
        return gr.update() if m is None else m

    def layout(m, how, wo):
        m = qkv_form.MODE_LABELS[m]
        rows = [
            gr.Row(visible=(group == QKV_DIRECT) == (m == qkv.DIRECT) and h == how)
            for group in (QKV_DIRECT, QKV_X)
            for h in (QKV_TABLES, QKV_TEXT)
        ]
        return rows + [gr.Checkbox(visible=m == qkv.FROM_X), gr.update(visible=wo), gr.update(visible=wo)]

    def switch(d):  # carry the values over: tables -> text or text -> tables (unreadable ones stay as they were)
        to_text = d[edit_as] == QKV_TEXT
        read = qkv_form.readable(matrices(d, QKV_TABLES if to_text else QKV_TEXT))
        return (
            {texts[n]: qkv_matrices.format_matrix(a) for n, a in read.items()}
            if to_text
            else {tables[n]: _qkv_table(a) for n, a in read.items()}
        )

    def load(name):
        if name not in presets:  # emptied (a change of mode, "Open in the calculator"): the form stays as it is
            return {about: gr.update()}
        f = qkv_form.preset_form(presets[name])
        out = {about: f["description"], mode: f["mode_label"], use_wo: f["use_wo"]}
        out |= {c: f["settings"][k] for k, c in settings.items()}
        for n, a in f["matrices"].items():
            out[tables[n]], out[texts[n]] = _qkv_table(a), qkv_matrices.format_matrix(a)
        return out

    def custom_only(scale_label, mask_label):  # the custom scale and mask can be typed only when chosen
        return gr.update(interactive=scale_label == "custom"), gr.update(interactive=mask_label == "custom 0/1")

    calculator_api.build_matrices()  # registered first: /calculate and /calculate_from_x keep their plain names
    box_list = [boxes[g, h] for g in (QKV_DIRECT, QKV_X) for h in (QKV_TABLES, QKV_TEXT)]
    box_list += [use_wo, tables["W_o"], texts["W_o"]]
    filled = [about, mode, use_wo, *settings.values(), *tables.values(), *texts.values()]
    shape = [mode, edit_as, use_wo]
    calculate(preset.change(load, preset, filled, **QUIET).then(layout, shape, box_list, **QUIET).then)
    mode.change(layout, shape, box_list, **QUIET)

    def mode_about(name, m):  # the text above the matrices; the preset box emptied once it no longer names them
        p = presets.get(name)
        if p is None:  # emptied before
            return qkv_form.MODE_ABOUT[qkv_form.MODE_LABELS[m]], gr.update()
        text = qkv_form.about(p, m)
        return text, gr.update() if text == p.description else gr.update(value=None)

    mode.input(mode_about, [preset, mode], [about, preset], **QUIET)
    calculate(mode.input, trigger_mode="always_last")
    use_wo.change(layout, shape, box_list, **QUIET)
    edit_as.change(
        switch, {edit_as, *tables.values(), *texts.values()}, [*tables.values(), *texts.values()], **QUIET
    ).then(layout, shape, box_list, **QUIET)
    calculate(go.click)
    for t in tables.values():
        calculate(t.input, qkv_ui_recalculate, trigger_mode="always_last")
    for c in (scale_mode, mask_mode):
        c.change(custom_only, [scale_mode, mask_mode], [scale, mask], **QUIET)
    calculate(
        mask_mode.input(
            fill_mask, {mask_mode, mask, mode, edit_as, *tables.values(), *texts.values()}, mask, **QUIET
        ).then
    )
    for c in (heads, scale_mode, dropout, use_wo):
        calculate(c.input, trigger_mode="always_last")
    for c in (scale, seed):
        calculate(c.submit)
    calculate(mask.blur)
    calculator_edit.build(about, preset, presets, [*tables.values(), *texts.values()])
    calculator_patches.build()
    form = {"tables": tables, "texts": texts, "about": about, "mode": mode, "edit_as": edit_as, "use_wo": use_wo}
    return form | {"preset": preset, "calculate": calculate, **settings}
