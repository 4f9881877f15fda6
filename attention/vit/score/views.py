"""The faithfulness line and its small picture: the perturbation curves of the shown map against a random order's.

png = curves_picture(scored)         # uint8 (H, W, 3): x = share of patches removed, y = the score
text = line(scored)                  # the one line under the map (Markdown, no visitor text in it)
path, data, facts = write_answer(scored)   # the API's files and facts
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from attention.render import font
from attention.vit.score.compute import Scored

COLORS = {  # (map, curve): colour; the shown map's strong, the random order's light
    ("shown", "positive"): (200, 40, 40),
    ("shown", "negative"): (30, 90, 200),
    ("random", "positive"): (240, 170, 170),
    ("random", "negative"): (160, 190, 240),
}


def curves_picture(s: Scored, size: tuple[int, int] = (420, 250)) -> np.ndarray:
    """uint8 (H, W, 3): the positive (most relevant removed first) and negative (least first) curves of the
    maps "shown" and "random" of `s` over the removed fraction, the score from 0 to its maximum, with a legend."""
    w, h = size
    img = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(img)
    f = font(12)
    left, right, top, bottom = 40, w - 24, 28, h - 30
    steps = np.asarray(s.maps["shown"].steps, np.float64)
    curves = {(m, c): getattr(s.maps[m], c) for m, c in COLORS}
    ymax = max(1e-6, max(float(np.max(v)) for v in curves.values()))
    xs = left + (steps - steps[0]) / max(1e-9, steps[-1] - steps[0]) * (right - left)
    d.line([(left, top), (left, bottom), (right, bottom)], fill=(90, 90, 90), width=1)
    for frac in (0.0, 0.5, 1.0):
        y = bottom - frac * (bottom - top)
        d.text((4, y - 7), f"{frac * ymax:.2f}", fill=(60, 60, 60), font=f)
    for x, st in ((xs[0], steps[0]), (xs[-1], steps[-1])):
        d.text((x - 8, bottom + 4), f"{st:.0%}", fill=(60, 60, 60), font=f)
    d.text(((left + right) // 2 - 60, bottom + 14), "patches removed", fill=(60, 60, 60), font=f)
    for (m, c), v in sorted(curves.items(), key=lambda kv: kv[0][0] == "shown"):  # the shown map on top
        ys = bottom - np.asarray(v, np.float64) / ymax * (bottom - top)
        d.line(list(zip(xs.tolist(), ys.tolist())), fill=COLORS[m, c], width=3 if m == "shown" else 2)
    legend = [("this view, most relevant first", ("shown", "positive")), ("least first", ("shown", "negative"))]
    legend += [("random order (light)", ("random", "positive"))]
    x = left
    for text, key in legend:
        d.line([(x, 12), (x + 16, 12)], fill=COLORS[key], width=3)
        d.text((x + 20, 5), text, fill=(30, 30, 30), font=f)
        x += 28 + int(d.textlength(text, font=f))
    return np.asarray(img)


def line(s: Scored) -> str:
    """The one line: the shown map's AUCs against the random order's, and what they mean (Markdown, no
    visitor text)."""
    a, r = s.maps["shown"], s.maps["random"]
    verdict = (
        "more faithful than a random order"
        if a.auc_positive < r.auc_positive and a.auc_negative > r.auc_negative
        else "less faithful than a random order"
        if a.auc_positive > r.auc_positive and a.auc_negative < r.auc_negative
        else "mixed against a random order"
    )
    what = "the top class's probability" if s.settings.get("kind") == "classifier" else "the score"
    return (
        f"**Faithfulness here:** removing this map's patches first drops {what} with AUC "
        f"**{a.auc_positive:.3f}** (random order {r.auc_positive:.3f}; lower is better); removing them last keeps "
        f"it at **{a.auc_negative:.3f}** (random {r.auc_negative:.3f}; higher is better): {verdict}."
    )


def describe(s: Scored) -> dict:
    """JSON-ready: the explained answer, the shown map's and the random order's figures, the settings."""
    return {
        "answer": {"index": s.target, "label": s.label, "probability": round(s.probability, 6)},
        **{m: {k: round(float(x), 6) for k, x in sc.figures().items()} for m, sc in s.maps.items()},
        "settings": s.settings,
        "line": line(s),
    }


def write_answer(s: Scored) -> tuple[str, str, dict]:
    """(the curves' PNG path, a .json of the curves, the facts) in a fresh folder, swept with the others."""
    import json

    from attention.render import png_bytes
    from attention.vit.draw.outputs import OUTPUT_ROOT, new_dir

    d = new_dir(OUTPUT_ROOT)
    pic = d / "faithfulness.png"
    pic.write_bytes(png_bytes(curves_picture(s)))
    curves = {m: {"positive": sc.positive.tolist(), "negative": sc.negative.tolist()} for m, sc in s.maps.items()}
    data = d / "faithfulness.json"
    data.write_text(json.dumps({"steps": list(s.settings["steps"]), "curves": curves}))
    return str(pic), str(data), describe(s)
