"""Pictures for the retrieval tab: sheets of digits and weight/loss plots, all as uint8 pixels.

Digit sheets are tiled by `attention.render` (one implementation of grids and nearest
upsampling). Plots are drawn by matplotlib without pyplot (no global state, safe across
threads) and returned rendered, as uint8 (H, W, 3): the tab caches and composes them like any
picture. matplotlib is imported on the first plot, not with this module (it is not on the
app's first screen).

Sizes are chosen for legibility where they are shown: a plot is drawn at PLOT_DPI for about
half its pixel width on screen (a 4.8 x 2.4 in figure is 768 x 384 px, shown 400-540 px wide),
so its 10-12 pt text reads as 11-14 px.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from attention import render

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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
PLOT_SIZE = (4.8, 2.4)  # inches
PLOT_DPI = 160
FONT = {"title": 12, "label": 11, "tick": 10, "legend": 9.5}  # points


def digit_grid(images: np.ndarray, nrow: int = 10, padding: int = 2, k: int = 3) -> np.ndarray:
    """Digits uint8 (n, 28, 28) in rows of `nrow` with gray padding (as torchvision's make_grid),
    upscaled k times (nearest): uint8 (k H, k W) with H = rows * (28 + padding) + padding.
    A single digit comes unpadded, as make_grid gives it."""
    padding = padding if len(images) > 1 else 0
    rgb = np.repeat(np.asarray(images, dtype=np.uint8)[..., None], 3, axis=-1)  # render tiles are (h, w, 3)
    sheet = render.grid(list(rgb), ncols=min(nrow, len(rgb)), pad=padding, bg=PAD_GRAY)[..., 0]
    return render.upsample(sheet, k)


def _figure(size: tuple[float, float] = PLOT_SIZE) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=size, dpi=PLOT_DPI, layout="constrained")


def pixels(fig: Figure, dpi: float | None = None) -> np.ndarray:
    """A figure rendered by Agg: uint8 (H, W, 3), H, W = its size in inches x `dpi` (default: its own)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if dpi:
        fig.set_dpi(dpi)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def weights_figure(
    weights: np.ndarray,
    labels: np.ndarray | None = None,
    title: str = "",
    xlabel: str = "database item",
    highlight: int | None = None,
    highlight_label: str | None = None,
) -> Figure:
    """Bar chart of weights (N,) over database items; bars coloured by digit label when given, with
    the weight each label gets in the legend. The bars are one PolyCollection (one artist, not N
    patches: about 5x faster to build and draw at N = 100). `highlight`: the bar marked, named
    `highlight_label` (default "item <highlight>": say which item it is when x is not the item's index)."""
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    weights = np.asarray(weights, dtype=float)
    fig = _figure()
    ax = fig.add_subplot()
    n = len(weights)
    x = np.arange(n)
    half = 0.5 if n > 60 else 0.4
    quads = np.stack(
        [
            np.stack([x - half, x - half, x + half, x + half], 1),
            np.stack([0 * weights, weights, weights, 0 * weights], 1),
        ],
        -1,
    )  # (N, 4, 2): each bar's corners
    colours = [CLASS_COLOURS[int(c)] for c in labels] if labels is not None else "#4c72b0"
    ax.add_collection(PolyCollection(quads, facecolors=colours, edgecolors="none"))
    if highlight is not None:
        ax.annotate(
            highlight_label or f"item {highlight}",
            (highlight, weights[highlight]),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            fontsize=FONT["tick"],
        )
    if labels is not None:
        mass = np.bincount(np.asarray(labels, int), weights, minlength=10)
        handles = [Patch(color=CLASS_COLOURS[c], label=f"{c}: {mass[c]:.2f}") for c in range(10)]
        ax.legend(
            handles=handles,
            title="label: weight",
            fontsize=FONT["legend"],
            title_fontsize=FONT["legend"],
            ncols=2,
            loc="upper left",
            bbox_to_anchor=(1.0, 1.05),
            frameon=False,
            handlelength=0.8,
            handletextpad=0.4,
            columnspacing=0.8,
            labelspacing=0.25,
        )
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(0, max(weights.max(initial=0) * 1.18, 1e-3))
    ax.set_xlabel(xlabel, fontsize=FONT["label"])
    ax.set_ylabel("weight", fontsize=FONT["label"])
    fig.suptitle(title, fontsize=FONT["title"])  # over the whole figure: a title wider than the axes is not cut
    ax.tick_params(labelsize=FONT["tick"])
    return fig


def loss_figure(losses: list[float], title: str = "training loss", steps_per_epoch: int | None = None) -> Figure:
    """Loss per step (faint) and its running mean (bold); epochs marked on the x axis when given."""
    fig = _figure()
    ax = fig.add_subplot()
    y = np.asarray(losses, dtype=float)
    if len(y):
        x = np.arange(1, len(y) + 1) / (steps_per_epoch or 1)
        ax.plot(x, y, color="#4c72b0", alpha=0.3, lw=1)
        k = min(20, len(y))
        ax.plot(x[k - 1 :], np.convolve(y, np.ones(k) / k, mode="valid"), color="#4c72b0", lw=2)
    ax.set_xlabel("epoch" if steps_per_epoch else "step", fontsize=FONT["label"])
    ax.set_ylabel("loss", fontsize=FONT["label"])
    ax.set_title(title, fontsize=FONT["title"])
    ax.tick_params(labelsize=FONT["tick"])
    return fig
