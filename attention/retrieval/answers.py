"""The retrieval API's answers (no Gradio here): one picture and one JSON-ready dict per call.

An API client gets what the tab shows in at most one file: numbers (scores, weights, the shuffle
order, top-10 rankings, losses) go in the `info` dict, and pictures that are only numbers (the
one-hot key matrix, the weight plots of the hard and soft sections) are left out. The trained
sections' many pictures (the query, each model's retrieved digit, weights plot and top 10) are
composed onto one sheet (`trained_sheet`).

    picture, info = answers.trained(100, 42, 3)  # uint8 (H, W, 3) sheet; info["cnn"]["top10"], ...
    path = answers.save_png(picture, "trained")  # what the endpoint serves (fast PNG, swept after a while)
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from attention.config import SETTINGS
from attention.crowd.cache import sweep
from attention.render import font, png_bytes
from attention.retrieval import lookup, panels, trained_panels

OUTPUT_DIR = Path(tempfile.gettempdir()) / "attention-explorer-retrieval"  # the endpoints' PNGs

PAD, GAP, HEADING = 12, 8, 24  # px around the sheet, between pictures, a heading's line
CAPTION = 18  # px below each top-10 tile
PLOT_HEIGHT = 2 * (panels.MATCH_SCALE * 28 + CAPTION) + GAP  # a weights plot is as tall as two rows of matches


def save_png(img: np.ndarray, name: str) -> str:
    """Write uint8 (H, W) or (H, W, 3) as a PNG (`render.png_bytes`: about 3x faster than PIL's) in
    OUTPUT_DIR and return its path. Gradio serves its own copy; at most once a minute, files older than
    ATTENTION_FILE_TTL seconds are deleted, so the folder is bounded by traffic x age."""
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    sweep(OUTPUT_DIR, SETTINGS.cache_age)
    path = OUTPUT_DIR / f"{name}-{uuid.uuid4().hex}.png"
    path.write_bytes(png_bytes(np.ascontiguousarray(img)))
    return str(path)


def database(n: int, seed: int) -> tuple[np.ndarray, dict]:
    """The database sheet (as `panels.database_view`) and info {n, seed, source, columns, labels (N,),
    train_pool, heldout_pool, note}: item i of `labels` is the digit at row i // columns, column i % columns."""
    db = panels.database(n, seed)
    pool = lookup.pools(full=True)
    view = panels.database_view(len(db), db.seed)
    info = {
        "n": len(db),
        "seed": db.seed,
        "source": db.source,
        "columns": panels.database_columns(len(db))[0],
        "labels": db.labels.tolist(),
        "train_pool": len(pool.train),
        "heldout_pool": len(pool.heldout),
        "note": view.note,
    }
    return view.grid, info


def hard(n: int, seed: int, index: int, shuffle_seed: int) -> tuple[np.ndarray, dict]:
    """The retrieved digit uint8 (224, 224) and `panels.hard_facts`'s info (scores and order hold the keys)."""
    _, retrieved, info = panels.hard_facts(n, seed, index, shuffle_seed)
    return panels.upsample(retrieved, panels.DIGIT_SCALE), info


def soft(n: int, seed: int, d: int, key_seed: int, scale: float) -> tuple[np.ndarray, dict]:
    """The retrieved (weighted average) digit uint8 (224, 224) and `panels.soft_facts`'s info (all weights)."""
    _, lk, info = panels.soft_facts(n, seed, d, key_seed, scale)
    return panels.upsample(lk.retrieved_images()[0], panels.DIGIT_SCALE), info


def many(n: int, seed: int, d: int, key_seed: int, scale: float, num_q: int) -> tuple[np.ndarray, dict]:
    """The sheet of retrievals, 8 a row, and their info (as `panels.many_view`)."""
    view = panels.many_view(n, seed, d, key_seed, scale, num_q)
    return view.grid, view.info


def trained(
    n: int, seed: int, query_index: int, state: trained_panels.Retrained | None = None
) -> tuple[np.ndarray, dict]:
    """Both trained models on held-out digit `query_index`: `trained_sheet` and the view's info."""
    view = trained_panels.trained_view(n, seed, query_index, state, plot_height=PLOT_HEIGHT)
    return trained_sheet(view), view.info


def sketch(n: int, seed: int, drawing, state: trained_panels.Retrained | None = None) -> tuple[np.ndarray, dict]:
    """As `trained`, for a drawing (see `trained_panels.sketch_view`)."""
    view = trained_panels.sketch_view(n, seed, drawing, state, plot_height=PLOT_HEIGHT)
    return trained_sheet(view), view.info


def trained_sheet(view: trained_panels.TrainedView) -> np.ndarray:
    """One picture of a TrainedView: uint8 (H, W, 3), white, with headings.

    First row: the query as the models see it, then each model's retrieved digit (224 x 224 each).
    Then one block per model: its weights plot (PLOT_HEIGHT px tall) beside its top 10
    (112 x 112 tiles, 5 a row, captioned "#rank · label · weight").
    """
    tile = panels.MATCH_SCALE * 28
    names = list(view.models)
    plots = []  # drawn PLOT_HEIGHT px tall by `trained` (else scaled here)
    for name in names:
        p = Image.fromarray(view.models[name].plot)
        if p.height != PLOT_HEIGHT:
            p = p.resize((round(p.width * PLOT_HEIGHT / p.height), PLOT_HEIGHT), Image.Resampling.LANCZOS)
        plots.append(p)
    matches_w = 5 * tile + 4 * GAP
    digit = view.query.shape[1]
    width = PAD * 2 + max((1 + len(names)) * digit + len(names) * GAP, max(p.width for p in plots) + GAP + matches_w)
    block = HEADING + PLOT_HEIGHT
    height = PAD * 2 + HEADING + digit + len(names) * (GAP * 2 + block)
    sheet = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(sheet)
    label = view.info.get("query_label")
    heads = ["query" + (f" (label {label})" if label is not None else " (your drawing)")]
    heads += [f"{name}: retrieved" for name in names]
    pictures = [view.query] + [view.models[name].retrieved for name in names]
    for i, (head, pic) in enumerate(zip(heads, pictures)):
        x = PAD + i * (digit + GAP)
        draw.text((x, PAD), head, fill="black", font=font(16))
        sheet.paste(Image.fromarray(pic).convert("RGB"), (x, PAD + HEADING))
    y = PAD + HEADING + digit
    for name, plot in zip(names, plots):
        y += GAP * 2
        info = view.info[name]
        head = f"{name} ({info['origin']}): weights over the database; top 10 (#rank · label · weight)"
        draw.text((PAD, y), head, fill="black", font=font(16))
        y += HEADING
        sheet.paste(plot, (PAD, y))
        x0 = PAD + plot.width + GAP
        for r, (img, caption) in enumerate(view.models[name].top10):
            x, ty = x0 + (r % 5) * (tile + GAP), y + (r // 5) * (tile + CAPTION + GAP)
            sheet.paste(Image.fromarray(img).convert("RGB"), (x, ty))
            draw.text((x + 2, ty + tile + 2), caption, fill="black", font=font(13))
        y += PLOT_HEIGHT
    return np.asarray(sheet)
