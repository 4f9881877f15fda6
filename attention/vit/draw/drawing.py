"""Where the ViT tab's pictures put things: one definition for the server and for the browser.

The server draws the large map and the head tiles (`attention.vit.draw.views`); the browser redraws
them the moment a patch, layer or head is picked (`attention/vit/serve/live.js`). Both follow this
module: the enlargements, the gallery's reduction (a whole factor, box average), the query's marks
as rectangles, the tiles' order and the click -> patch rule. `Layout.to_json` is what the browser
receives in every live payload (`attention.vit.serve.live`): numbers and rectangles, never a copy of
these rules in the script.

    lay = layout((448, 448), patch=16, grid=(28, 28), heads=6)
    lay.tile_reduce                       # 2: 448 px tiles shown at 224 px in the gallery
    paint(big, crosshair_boxes((3, 4), lay.patch * lay.scale, big.shape[:2]))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from attention.render import MIN_SIDE, enlargement

__all__ = ["enlargement"]  # the one enlargement rule (`render`), named here as before

MIN_DISPLAY = MIN_SIDE  # px: smaller images (MNIST's 28) are shown enlarged by a whole factor (`render.enlargement`)
BIG_DISPLAY = 480  # px: the large map's shorter side is at least this (enlarged by a whole factor)
THUMB_SIDE = 400  # px: the gallery's copies of the tiles are reduced to at most this longer side
QUERY_COLOR = (0, 255, 255)  # cyan: the square around the query patch and the crosshair's arms
EDGE_COLOR = (0, 0, 0)  # the crosshair arms' dark edge, so they show on any colour
REACH = 2.5  # the crosshair's arms, in patches

# A filled rectangle: rows y0..y1 and columns x0..x1 (end exclusive, inside the picture), and its colour.
Box = tuple[int, int, int, int, tuple[int, int, int]]


def reduction(size: tuple[int, int], at_most: int) -> int:
    """The smallest whole factor that brings the longer side of `size` (w, h) to `at_most` px or less."""
    return max(1, -(-max(size) // at_most))


def box_reduce(img: np.ndarray, k: int) -> np.ndarray:
    """uint8 (H, W, C) -> (ceil(H / k), ceil(W / k), C): each k x k box averaged (edge boxes over the
    pixels they have), rounded as Pillow's `Image.reduce` rounds. The one reduction of the tab's
    pictures; live.js `boxReduce` does the same sums and rounding."""
    a = np.ascontiguousarray(img, dtype=np.uint8)
    return a if k == 1 else np.asarray(Image.fromarray(a).reduce(k))


def reduced(img: np.ndarray, max_side: int) -> np.ndarray:
    """`img` uint8 (H, W, 3) reduced by the smallest whole factor (`reduction`, `box_reduce`) that brings
    its longer side to `max_side` or less (unchanged when it already fits)."""
    return box_reduce(img, reduction(img.shape[1::-1], max_side))


def _clip(boxes: list[Box], height: int, width: int) -> list[Box]:
    """The boxes cut to a picture of `height` x `width`, empty ones dropped."""
    out = []
    for y0, y1, x0, x1, rgb in boxes:
        y0, y1, x0, x1 = max(0, y0), min(height, y1), max(0, x0), min(width, x1)
        if y0 < y1 and x0 < x1:
            out.append((y0, y1, x0, x1, rgb))
    return out


def square_boxes(patch: tuple[int, int], step: int, size: tuple[int, int], color=QUERY_COLOR) -> list[Box]:
    """The square around patch (row, col) of a picture of `size` (H, W) whose patches are `step` px:
    four bars max(1, step // 8) px wide inside the patch's edge (what `render.mark_patch` draws)."""
    r, c = patch
    w = max(1, step // 8)
    y0, x0, y1, x1 = r * step, c * step, (r + 1) * step, (c + 1) * step
    bars = [(y0, y0 + w, x0, x1), (y1 - w, y1, x0, x1), (y0, y1, x0, x0 + w), (y0, y1, x1 - w, x1)]
    return _clip([(*b, tuple(color)) for b in bars], *size)


def crosshair_boxes(
    patch: tuple[int, int], step: int, size: tuple[int, int], color=QUERY_COLOR, reach: float = REACH
) -> list[Box]:
    """The large map's query mark on a picture of `size` (H, W) with `step` px patches, in painting
    order: four arms `reach` patches long pointing at patch (row, col), each 2 * max(1, step // 12) + 1
    px wide, first a dark edge 1 px wider, then the colour; then the square around the patch."""
    r, c = patch
    y, x = r * step + step // 2, c * step + step // 2
    t, arm, half = max(1, step // 12), int(reach * step), step // 2
    boxes: list[Box] = []
    for pad, rgb in ((1, EDGE_COLOR), (0, tuple(color))):
        w = t + pad
        boxes += [
            (y - w, y + w + 1, x - half - arm, x - half, rgb),  # left arm
            (y - w, y + w + 1, x + half + 1, x + half + 1 + arm, rgb),  # right arm
            (y - half - arm, y - half, x - w, x + w + 1, rgb),  # top arm
            (y + half + 1, y + half + 1 + arm, x - w, x + w + 1, rgb),  # bottom arm
        ]
    return _clip(boxes, *size) + square_boxes(patch, step, size, color)


def paint(img: np.ndarray, boxes: list[Box]) -> np.ndarray:
    """A copy of uint8 (H, W, 3) `img` with `boxes` filled in order."""
    out = np.array(img, copy=True)
    for y0, y1, x0, x1, rgb in boxes:
        out[y0:y1, x0:x1] = rgb
    return out


def patch_at(x: float, y: float, step: int, grid: tuple[int, int]) -> tuple[int, int]:
    """(row, col) of the patch under pixel (x, y) of a picture with `step` px patches on a `grid`
    (gh, gw): whole patches down and across, clamped to the grid."""
    gh, gw = grid
    return min(gh - 1, max(0, int(y // step))), min(gw - 1, max(0, int(x // step)))


def tile_rows(view: str, heads: int) -> list[int]:
    """Which map each gallery tile shows, in order, as rows of the (heads + 1) maps with the mean last:
    heads: every head, then the mean; mean: the mean alone; other views: none drawn in the browser."""
    return list(range(heads + 1)) if view == "heads" else [heads] if view == "mean" else []


@dataclass(frozen=True)
class Layout:
    """How one pass's pictures are laid out: the image is `grid` (gh, gw) patches of `patch` px;
    the large map is it enlarged `scale` times, each tile `tile_scale` times, and the gallery shows
    the tiles reduced `tile_reduce` times (box average)."""

    patch: int
    grid: tuple[int, int]
    heads: int
    scale: int
    tile_scale: int
    tile_reduce: int

    @property
    def image_size(self) -> tuple[int, int]:
        """(H, W) of the image, px."""
        return self.grid[0] * self.patch, self.grid[1] * self.patch

    def big_marks(self, query: tuple[int, int] | None) -> list[Box]:
        """The large map's crosshair on `query` (none for a named token such as CLS)."""
        H, W = self.image_size
        step = self.patch * self.scale
        return [] if query is None else crosshair_boxes(query, step, (H * self.scale, W * self.scale))

    def tile_marks(self, query: tuple[int, int] | None) -> list[Box]:
        """A tile's square on `query` at full tile size (before the gallery's reduction)."""
        H, W = self.image_size
        step = self.patch * self.tile_scale
        return [] if query is None else square_boxes(query, step, (H * self.tile_scale, W * self.tile_scale))

    def to_json(self, query: tuple[int, int] | None) -> dict:
        """What the browser draws by (JSON-able): the sizes, the tiles of each view and the marks of `query`."""
        return {
            "patch": self.patch,
            "grid": list(self.grid),
            "scale": self.scale,
            "tile_scale": self.tile_scale,
            "tile_reduce": self.tile_reduce,
            "tile_rows": {v: tile_rows(v, self.heads) for v in ("heads", "mean")},
            "marks": self.marks_json(query),
        }

    def marks_json(self, query: tuple[int, int] | None) -> dict:
        """The marks of `query` as the browser paints them: {"big": [[y0, y1, x0, x1, r, g, b], ...], "tile": ...}."""
        return {
            "big": [[*b[:4], *b[4]] for b in self.big_marks(query)],
            "tile": [[*b[:4], *b[4]] for b in self.tile_marks(query)],
        }


def layout(image_size: tuple[int, int], patch: int, grid: tuple[int, int], heads: int) -> Layout:
    """The layout of a pass whose image is `image_size` (w, h) px, `grid` (gh, gw) patches of `patch` px."""
    tile_scale = enlargement(image_size, MIN_DISPLAY)
    w, h = image_size
    return Layout(
        patch=patch,
        grid=tuple(grid),
        heads=heads,
        scale=enlargement(image_size, BIG_DISPLAY),
        tile_scale=tile_scale,
        tile_reduce=reduction((w * tile_scale, h * tile_scale), THUMB_SIDE),
    )
