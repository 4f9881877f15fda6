"""The step-by-step view drawn: its map (the row at a temperature, the selected key marked), its HTML
(vectors, products, the table of keys), and one self-contained HTML file of a whole view (`export_html`).

Every style is inline (no stylesheet, no script, no network): the same HTML shows in the tab and in an
exported file opened anywhere. Every name that can come from a visitor (the model) is escaped.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from attention.errors import AttentionError
from attention.render import png_bytes
from attention.vit.draw import drawing
from attention.vit.draw import frames as vit_frames
from attention.vit.draw import views as vit_views
from attention.vit.draw.outputs import OUTPUT_ROOT, new_dir
from attention.vit.draw.texts import details
from attention.vit.draw.views import query_image
from attention.vit.engine import stepwise
from attention.vit.engine.extract import AttentionMaps
from attention.vit.engine.query import label as query_label
from attention.vit.engine.request import CMAP, OPACITY
from attention.vit.engine.stepwise import RowSteps

KEY_COLOR = (255, 64, 160)  # magenta: the selected key's square (the query keeps its cyan crosshair)


def stepwise_map(
    res: AttentionMaps, steps: RowSteps, alpha: float = OPACITY.default, cmap: str = CMAP.default
) -> np.ndarray:
    """uint8 (H*s, W*s, 3): the row at the steps' temperature over the image, drawn as the tab's large map
    (`views.query_image`: at temperature 1 the same pixels as head `steps.head`'s map), the query's crosshair
    and a magenta square on the selected key (a patch)."""
    img = query_image(res, rollout=steps.map, alpha=alpha, cmap=cmap)
    j = int(steps.index[steps.selected]) - steps.num_prefix_tokens
    if j >= 0:
        step = img.shape[0] // steps.grid[0]
        img = drawing.paint(img, drawing.square_boxes(divmod(j, steps.grid[1]), step, img.shape[:2], KEY_COLOR))
    return img


def data_uri(data: bytes, kind: str = "image/png") -> str:
    """Bytes as a data: URI (base64)."""
    return f"data:{kind};base64," + base64.b64encode(data).decode()


def _cell(x: float, top: float, width: int = 9) -> str:
    """One coloured cell: blue for negative, red for positive, the strength |x| / top."""
    a = 0.0 if top <= 0 else min(1.0, abs(float(x)) / top)
    r, g, b = (220, 60, 40) if x > 0 else (40, 90, 220)
    style = (
        f"width:{width}px;min-width:{width}px;height:16px;padding:0;border:none;background:rgba({r},{g},{b},{a:.3f})"
    )
    return f'<td title="{x:.6g}" style="{style}"></td>'


def vectors_html(steps: RowSteps) -> str:
    """q_i, k_selected and their element-wise product as rows of coloured cells, one per dimension
    (the neuron view): red positive, blue negative; the product's cells sum to q_i . k_j."""
    sel = steps.selected
    rows = [
        ("q<sub>i</sub>", steps.q),
        ("k<sub>j</sub>", steps.k[sel]),
        ("q<sub>i</sub> × k<sub>j</sub>", steps.products),
    ]
    top_qk = float(max(np.abs(steps.q).max(), np.abs(steps.k[sel]).max(), 1e-12))
    top_p = float(max(np.abs(steps.products).max(), 1e-12))
    out = ['<table style="border-collapse:separate;border-spacing:1px;font-size:13px;border:none;width:auto">']
    for name, vec in rows:
        top = top_p if "×" in name else top_qk
        cells = "".join(_cell(x, top, max(6, min(22, 352 // len(vec)))) for x in vec)
        th = f'<th style="text-align:right;padding:0 6px 0 0;border:none;white-space:nowrap">{name}</th>'
        out.append(f"<tr>{th}{cells}</tr>")
    out.append("</table>")
    order = np.argsort(-steps.products)
    best = ", ".join(f"d{int(d)} ({steps.products[d]:+.3f})" for d in order[:3])
    worst = ", ".join(f"d{int(d)} ({steps.products[d]:+.3f})" for d in order[::-1][:2])
    out.append(
        f'<p style="margin:4px 0">Sum of the {len(steps.q)} products: <b>q<sub>i</sub> · k<sub>j</sub> = '
        f"{steps.dots[sel]:.4f}</b> (red: positive, blue: negative; the darker, the larger). Pulling this weight "
        f"up most: {best}; down most: {worst}.</p>"
    )
    return "".join(out)


def keys_html(steps: RowSteps) -> str:
    """The kept keys as a table: q·k, × scale, + bias, the score, its weight in the whole row at T and its
    weight among the kept keys only (what the calculator computes)."""
    bias = steps.bias is not None
    head = [
        "key",
        "q·k",
        f"× {steps.scale:.4g}",
        *(["+ bias"] if bias else []),
        "score",
        f"weight (T={steps.temperature:g})",
    ]
    head.append("among these keys")
    th = "".join(f'<th style="padding:2px 6px;text-align:right">{h}</th>' for h in head)
    out = [f'<table style="border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums"><tr>{th}</tr>']
    for m, name in enumerate(steps.names):
        j = int(steps.index[m])
        vals = [steps.dots[m], steps.dots[m] * steps.scale, *([steps.bias[m]] if bias else []), steps.logits[m]]
        vals += [steps.weights[j], steps.restricted[m]]
        tds = "".join(f'<td style="padding:2px 6px;text-align:right">{v:.4f}</td>' for v in vals)
        style = "background:#ffe0f0;font-weight:600" if m == steps.selected else ""
        out.append(f'<tr style="{style}"><td style="padding:2px 6px">{html.escape(name)}</td>{tds}</tr>')
    out.append("</table>")
    return "".join(out)


def summary_html(steps: RowSteps, model: str = "") -> str:
    """One paragraph: which row, the formula, the top share and the entropy."""
    who = f"<code>{html.escape(model)}</code> · " if model else ""
    r, c = steps.top_patch
    b = " + bias<sub>ij</sub>" if steps.bias is not None else ""
    return (
        f'<p style="margin:4px 0">{who}layer {steps.layer} · head {steps.head} · query '
        f"{html.escape(query_label(steps.query))} · selected key <b>{html.escape(steps.selected_name)}</b></p>"
        f'<p style="margin:4px 0">score<sub>j</sub> = q<sub>i</sub> · k<sub>j</sub> × {steps.scale:.4g}{b}; '
        f"weight<sub>j</sub> = softmax(score / T)<sub>j</sub>, T = {steps.temperature:g}"
        f"{' (the model)' if steps.temperature == 1 else ''}.</p>"
        f'<p style="margin:4px 0" data-top-share="{steps.top_share:.6f}" data-entropy="{steps.entropy:.6f}">'
        f"Top patch ({r}, {c}) holds <b>{steps.top_share:.1%}</b> of the row · entropy "
        f"<b>{steps.entropy:.2f} bits</b> (uniform: {steps.max_entropy:.2f}).</p>"
    )


def panel_html(steps: RowSteps, model: str = "") -> str:
    """The whole step-by-step text: summary, the neuron view of the selected key, the table of keys."""
    return (
        '<div class="stepwise" style="line-height:1.35;max-width:100%">'
        + summary_html(steps, model)
        + '<div style="overflow-x:auto;max-width:100%;margin:6px 0">'
        + vectors_html(steps)
        + "</div>"
        + '<div style="overflow-x:auto;max-width:100%">'
        + keys_html(steps)
        + "</div></div>"
    )


def export_html(
    title: str,
    large_map: bytes,
    tiles: Sequence[tuple[bytes, str]],
    steps: RowSteps | None = None,
    steps_map: bytes | None = None,
    model: str = "",
    details: str = "",
    caption: str = "",
    legend: str = "",
) -> str:
    """One self-contained HTML page: the large map (its `caption`, escaped, and `legend`, the tab's own inline
    HTML, `texts.legend_html`), every tile with its caption and the step-by-step panel, every picture inline
    (data: URIs; JPEG or PNG bytes as the tab served them). Opens with no server."""

    def img(data: bytes, alt: str, ident: str = "", width: str = "") -> str:
        kind = "image/jpeg" if data[:3] == b"\xff\xd8\xff" else "image/png"
        i = f' id="{ident}"' if ident else ""
        w = f' style="max-width:{width};height:auto"' if width else ""
        return f'<img{i} alt="{html.escape(alt)}" src="{data_uri(data, kind)}"{w}>'

    figs = "".join(
        f'<figure style="margin:0;display:inline-block;vertical-align:top;width:200px">'
        f'{img(b, c, f"tile-{n}", "200px")}<figcaption style="font-size:12px">{html.escape(c)}</figcaption></figure>'
        for n, (b, c) in enumerate(tiles)
    )
    step = ""
    if steps is not None:
        pic = img(steps_map, "the row step by step", "steps-map", "100%") if steps_map else ""
        step = '<h2>Step by step</h2><div style="display:flex;flex-wrap:wrap;gap:12px">'
        # (min-width 0: the tables scroll in their own boxes on a phone instead of widening the page)
        step += f'<div style="max-width:480px">{pic}</div>'
        step += f'<div style="flex:1 1 300px;min-width:0">{panel_html(steps, model)}</div></div>'
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title></head>"
        '<body style="font-family:system-ui,sans-serif;margin:16px;color:#222">'
        f'<h1 style="font-size:20px">{html.escape(title)}</h1><p>{html.escape(details)}</p>'
        f"<h2>Large map</h2>{img(large_map, 'large map', 'large-map', '100%')}"
        f'<h2>Every head</h2><div style="display:flex;flex-wrap:wrap;gap:8px">{figs}</div>{step}'
        '<p style="font-size:12px;color:#666">Exported from Attention Explorer: every picture is inside this file.</p>'
        "</body></html>"
    )


def write_export(page: str, folder: Path, name: str = "attention-view.html") -> Path:
    """Write `page` as `folder`/`name` (UTF-8); returns the path."""
    path = Path(folder) / name
    path.write_text(page, encoding="utf-8")
    return path


def export_view(
    p, v: vit_frames.ViewSpec, head: int, k: int = stepwise.K, temperature: float = stepwise.TEMPERATURE, key=None
) -> Path:
    """One self-contained HTML file of view `v` of pass `p` (the large map, the tiles as the tab shows them)
    and head `head`'s step by step (left out, with a note, for a query that has none: the pooling head's)."""
    f = vit_frames.tab_frame(p, v, head=head)
    tiles = [(Path(t).read_bytes(), c) for t, c in zip(f.outputs.thumbs, f.outputs.captions)]
    s = smap = None
    try:
        s = stepwise.explain_row(
            p, query=f.res.query, layer=f.res.layer, head=head, k=k, key=key, temperature=temperature
        )
        smap = png_bytes(stepwise_map(f.res, s, v.alpha, v.cmap))
    except AttentionError:
        pass
    title = f"Attention Explorer · {p.model} · layer {f.res.layer} · {query_label(f.res.query)}"
    what = f"head {head}" if v.view in ("heads", "masks") else vit_views.VIEWS[v.view].lower()
    caption = f"{vit_views.VIEWS[v.view]} view: {what}, layer {f.res.layer}"
    plain_details = details(f.res, model=p.model, device=p.device, plain=True)
    page = export_html(title, Path(f.query_png).read_bytes(), tiles, s, smap, p.model, plain_details, caption, f.legend)
    return write_export(page, new_dir(OUTPUT_ROOT))
