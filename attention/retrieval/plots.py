"""Pictures for the retrieval tab: sheets of digits and weight/loss plots.

Digit sheets are uint8 arrays tiled by `attention.render` (one implementation of grids and
nearest upsampling); figures are `matplotlib.figure.Figure` objects built without pyplot
(no global state, safe across threads).
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from attention import render

PAD_GRAY = 76  # gray padding (torchvision's make_grid pad_value 0.3), visible between white-on-black digits
CLASS_COLOURS = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
]


def digit_grid(images: np.ndarray, nrow: int = 10, padding: int = 2, k: int = 3) -> np.ndarray:
    """Digits uint8 (n, 28, 28) in rows of `nrow` with gray padding (as torchvision's make_grid),
    upscaled k times (nearest): uint8 (k H, k W) with H = rows * (28 + padding) + padding.
    A single digit comes unpadded, as make_grid gives it."""
    padding = padding if len(images) > 1 else 0
    rgb = np.repeat(np.asarray(images, dtype=np.uint8)[..., None], 3, axis=-1)  # render tiles are (h, w, 3)
    sheet = render.grid(list(rgb), ncols=min(nrow, len(rgb)), pad=padding, bg=PAD_GRAY)[..., 0]
    return render.upsample(sheet, k)


def weights_figure(
    weights: np.ndarray,
    labels: np.ndarray | None = None,
    title: str = "",
    xlabel: str = "database item",
    highlight: int | None = None,
) -> Figure:
    """Bar chart of weights (N,) over database items; bars coloured by digit label when given."""
    weights = np.asarray(weights, dtype=float)
    fig = Figure(figsize=(6.4, 2.6), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    x = np.arange(len(weights))
    colours = [CLASS_COLOURS[int(c)] for c in labels] if labels is not None else "#4c72b0"
    ax.bar(x, weights, width=1.0 if len(x) > 60 else 0.8, color=colours)
    if highlight is not None:
        ax.annotate(
            f"item {highlight}",
            (highlight, weights[highlight]),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            fontsize=8,
        )
    if labels is not None:
        mass = np.bincount(np.asarray(labels, int), weights, minlength=10)
        handles = [ax.bar([0], [0], color=CLASS_COLOURS[c], label=f"{c}: {mass[c]:.2f}") for c in range(10)]
        ax.legend(
            handles=handles,
            title="label: weight",
            fontsize=7,
            title_fontsize=7,
            ncols=2,
            loc="upper left",
            bbox_to_anchor=(1.0, 1.0),
            frameon=False,
        )
    ax.set_xlim(-0.5, len(x) - 0.5)
    ax.set_ylim(0, max(weights.max(initial=0) * 1.15, 1e-3))
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel("weight", fontsize=9)
    ax.set_title(title, fontsize=10)
    ax.tick_params(labelsize=8)
    return fig


def loss_figure(losses: list[float], title: str = "training loss", steps_per_epoch: int | None = None) -> Figure:
    """Loss per step (faint) and its running mean (bold); epochs marked on the x axis when given."""
    fig = Figure(figsize=(6.4, 2.6), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    y = np.asarray(losses, dtype=float)
    if len(y):
        x = np.arange(1, len(y) + 1) / (steps_per_epoch or 1)
        ax.plot(x, y, color="#4c72b0", alpha=0.3, lw=1)
        k = min(20, len(y))
        ax.plot(x[k - 1 :], np.convolve(y, np.ones(k) / k, mode="valid"), color="#4c72b0", lw=2)
    ax.set_xlabel("epoch" if steps_per_epoch else "step", fontsize=9)
    ax.set_ylabel("loss", fontsize=9)
    ax.set_title(title, fontsize=10)
    ax.tick_params(labelsize=8)
    return fig
