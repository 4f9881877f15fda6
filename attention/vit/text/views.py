"""A text relevance result drawn: each prompt's map as a captioned overlay, the segmentation in the prompts'
colours, and the files of an answer (picture, .npz, facts).

    ts = tiles(tr, "chefer")                  # [Tile(prompt 1), ..., Tile(segmentation)]
    sheet_png, npz, info = write_answer(tr, model="digit_clip")
"""

from __future__ import annotations

import numpy as np

from attention.render import MIN_SIDE, grid, mark_patch, overlay, png_bytes, upsample
from attention.render import enlarged as render_enlarged
from attention.vit.draw.outputs import OUTPUT_ROOT, Tile, new_dir, save_npz, sheet
from attention.vit.engine.request import CMAP, OPACITY
from attention.vit.text.openvocab import OPEN_RULES
from attention.vit.text.patchrow import PatchRows
from attention.vit.text.result import NONE, RULES, TextRelevance

# smaller images (digit_clip's canvases) are enlarged by a whole factor for display: `render.MIN_SIDE`
PALETTE = np.array(  # the prompts' colours in the segmentation (Tableau 10), one per prompt up to MAX_PROMPTS
    [
        [31, 119, 180],
        [255, 127, 14],
        [44, 160, 44],
        [214, 39, 40],
        [148, 103, 189],
        [140, 86, 75],
        [227, 119, 194],
        [127, 127, 127],
    ],
    np.uint8,
)
RULE_NAMES = {
    "chefer": "Chefer et al. 2021 (generic rule)",
    "legrad": "LeGrad (layer-wise gradients)",
    "similarity": "patch-text similarity (raw)",
    "maskclip": "MaskCLIP (value path)",
    "sclip": "SCLIP (q-q + k-k attention)",
    "clearclip": "ClearCLIP (q-q attention, no residual)",
    "naclip": "NACLIP (k-k attention + neighbourhood)",
    "proxy": "proxy attention (ProxyCLIP's idea)",
}
README_NPZ = """Attention Explorer: text relevance.
Arrays: one per rule computed (chefer, legrad, similarity, maskclip, sclip, clearclip, naclip, proxy), each
(P, gh, gw) float32: each prompt's map over the patches (Chefer et al.'s rule with the image-text logit as
target; LeGrad, min-max scaled; each patch's own logit; the open-vocabulary rules: the cosine of each patch's
embedding with the prompt); segmentation (gh, gw) int: the prompt each patch clearly matches by the chosen rule,
-1 for none; logits, scores (P,) (CLIP: cosine; SigLIP: sigmoid); prompts (P,); image uint8 (gh*p, gw*p, 3).
"""


AXES = {
    **dict.fromkeys(RULES, "prompts, rows, cols"),
    "segmentation": "rows, cols",
    "logits": "prompts",
    "scores": "prompts",
    "prompts": "prompts",
    "image": "height, width, rgb",
}
UNITS = {
    "chefer": "relevance for the image-text logit (Chefer et al. 2021)",
    "legrad": "LeGrad relevance, min-max scaled per prompt",
    "similarity": "each patch's own image-text logit",
    **{r: "cosine of each patch's embedding with the prompt" for r in OPEN_RULES},
    "segmentation": "index into prompts, -1 for none",
    "image": "uint8 RGB, the pixels the model saw",
}


def text_meta(tr: TextRelevance, model: str, rule: str) -> dict:
    """The common `meta` of the answer's .npz (`attention.npzfile`): kind "text_relevance", the grid, the rule
    of the segmentation and its options, the prompts, the score's kind, LeGrad's layers; no layer or query."""
    return {
        "kind": "text_relevance",
        "model": model,
        "grid": list(tr.grid),
        "rule": rule,
        "prompts": list(tr.prompts),
        "score": tr.score_name,
        "options": tr.options,
        "legrad_layers": tr.legrad_layers,
        "axes": AXES,
        "units": UNITS,
    }


def hex_colour(i: int) -> str:
    """Prompt i's colour in the segmentation, as #rrggbb."""
    return "#" + "".join(f"{int(c):02x}" for c in PALETTE[i % len(PALETTE)])


def enlarged(tr: TextRelevance, min_side: int = MIN_SIDE) -> np.ndarray:
    """The image tr's grid aligns to, uint8 (H, W, 3), enlarged (nearest) by the smallest whole factor that
    brings its shorter side to `min_side` px or more."""
    return render_enlarged(tr.image, min_side)


def segmentation_image(tr: TextRelevance, rule: str, base: np.ndarray, alpha: float = 0.55) -> np.ndarray:
    """The segmentation (each labelled patch in its prompt's PALETTE colour; "none" left as it is) over `base`
    (H, W, 3), uint8."""
    seg = tr.segmentation(rule)
    colours = PALETTE[seg % len(PALETTE)]  # (gh, gw, 3)
    step = base.shape[0] // tr.grid[0]
    big = np.stack([upsample(colours[..., c].astype(np.float32), step) for c in range(3)], -1)
    labelled = upsample((seg != NONE).astype(np.float32), step)[..., None] * alpha
    return (base * (1 - labelled) + big * labelled).round().clip(0, 255).astype(np.uint8)


def score_text(tr: TextRelevance, i: int) -> str:
    """Prompt i's score as a caption says it: CLIP's cosine, SigLIP's sigmoid as a percentage."""
    s = float(tr.scores[i])
    return f"sigmoid {s:.1%}" if tr.kind == "siglip" else f"cosine {s:.3f}"


def tiles(
    tr: TextRelevance,
    rule: str = "chefer",
    *,
    alpha: float = OPACITY.default,
    cmap: str = CMAP.default,
    min_side: int = MIN_SIDE,
) -> list[Tile]:
    """Each prompt's `rule` map (min-max scaled) over the enlarged image, captioned with the rule and its score,
    then the segmentation. Captions carry the prompts as typed (pictures, not HTML)."""
    base = enlarged(tr, min_side)
    maps = tr.maps(rule)
    name = RULE_NAMES[rule].split(" (")[0]
    out = [
        Tile(overlay(base, maps[i], alpha=alpha, cmap=cmap), f"'{p}' · {name} · {score_text(tr, i)}", f"prompt_{i}")
        for i, p in enumerate(tr.prompts)
    ]
    caption = f"Segmentation ({name}): each patch's clear best prompt, none elsewhere"
    out.append(Tile(segmentation_image(tr, rule, base), caption, "segmentation"))
    return out


def rows_picture(
    pr: PatchRows, *, alpha: float = OPACITY.default, cmap: str = CMAP.default, min_side: int = MIN_SIDE
) -> np.ndarray:
    """The clicked patch's last-block attention rows side by side over the enlarged image, uint8 (H, W, 3): the
    model's own, then the rule's (each min-max scaled on its own), the patch outlined, each captioned with its
    weight on the prefix tokens."""
    base = render_enlarged(pr.image.convert("RGB"), min_side)
    step = base.shape[0] // pr.grid[0]
    rows = [mark_patch(overlay(base, m.numpy(), alpha=alpha, cmap=cmap), pr.patch, step) for m in (pr.own, pr.rule)]
    name = RULE_NAMES[pr.rule_name].split(" (")[0]
    own, new = (f"{w:.0%} on the prefix tokens" for w in pr.prefix)
    return grid(rows, ncols=2, labels=[f"the model's own q-k row ({own})", f"{name}'s row ({new})"])


def describe(tr: TextRelevance, *, model: str, rule: str) -> dict:
    """The answer's facts: model, ranking, rule, grid, what each picture is, colours, time."""
    return {
        "model": model,
        **tr.summary(),
        "rule": rule,
        "rule_name": RULE_NAMES[rule],
        "pictures": [*(f"prompt_{i}" for i in range(len(tr.prompts))), "segmentation"],
        "colours": {p: hex_colour(i) for i, p in enumerate(tr.prompts)},
        "text_relevance_ms": round(tr.seconds * 1e3, 1),
    }


def arrays(tr: TextRelevance, rule: str) -> dict[str, np.ndarray]:
    """For a .npz: every computed rule's maps (P, gh, gw), the segmentation by `rule`, logits, scores, prompts,
    image."""
    return {
        **{r: tr.maps(r) for r in tr.rules},
        "segmentation": tr.segmentation(rule).astype(np.int32),
        "logits": tr.logits,
        "scores": tr.scores,
        "prompts": np.array(tr.prompts),
        "image": np.asarray(tr.image, dtype=np.uint8),
    }


def write_answer(
    tr: TextRelevance, *, model: str, rule: str = "chefer", alpha: float = OPACITY.default, cmap: str = CMAP.default
) -> tuple[str, str, dict]:
    """(the captioned sheet PNG's path, the .npz's path, the facts) in a fresh folder, swept with the others."""
    ts = tiles(tr, rule, alpha=alpha, cmap=cmap)
    d = new_dir(OUTPUT_ROOT)
    pic = d / "text_relevance.png"
    pic.write_bytes(png_bytes(sheet(ts, ncols=min(4, len(ts)))))
    data = {**arrays(tr, rule), "model": np.array(model)}
    pngs = {t.name: png_bytes(t.image) for t in ts}
    npz = save_npz(d / "text_relevance.npz", data, pngs, readme=README_NPZ, meta=text_meta(tr, model, rule))
    return str(pic), npz, describe(tr, model=model, rule=rule)
