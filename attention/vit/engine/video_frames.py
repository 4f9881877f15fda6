"""One output frame of an attention video: the views a video draws (`VIDEO_VIEWS`), its maps at the
selected layer and its picture (`VideoFrameMaps`), and the checks of a video's view and head.

    f.maps, f.mean, f.masks         # (H, gh, gw) float32, (gh, gw), (H, gh, gw) bool
    f.picture("fig3")               # uint8 (H', W', 3): DINO Fig. 3's colours over the frame
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from attention.render import MIN_SIDE, enlargement, mask_overlay, masks_figure, overlay, upsample
from attention.shows import Shows
from attention.validate import head_index
from attention.vit.engine.batch import BatchMaps
from attention.vit.engine.request import CMAP, OPACITY, VIDEO_VIEW

VIDEO_VIEWS = VIDEO_VIEW.choices  # declared in `request`, named here as before
VIDEO_AXES = {  # the .npz of `video.write_video`: each array's axes and units (`attention.npzfile`)
    "maps": "frames, heads, rows, cols",
    "mean": "frames, rows, cols",
    "masks": "frames, heads, rows, cols",
    "time": "frames",
    "source_index": "frames",
    "query": "row, col (-1, -1: a token, named in meta's query)",
    "grid": "rows, cols",
}
VIDEO_UNITS = {
    "maps": "attention weight (softmax: a query's row sums to 1 over all tokens)",
    "mean": "attention weight, mean over heads",
    "masks": "True where a head's map reaches threshold x its maximum",
    "time": "seconds into the source",
    "source_index": "the source frame's index",
    "fps": "output frames per second",
}
STACKED = "stacked"  # side_by_side's other layout: the frame above its attention (a phone's narrow page)
# smaller frames (a digit clip) are drawn enlarged by a whole factor: `render.MIN_SIDE`, `render.enlargement`


def check_video_view(view: str) -> str:
    """Normalise a video view name; InputError lists the accepted ones."""
    return VIDEO_VIEW.check(view)


def check_head(head, n: int) -> int:
    """A head index in 0..n-1 (negative counts from the end); InputError otherwise (`validate.head_index`)."""
    return head_index(head, n, from_end=True)


@dataclass
class VideoFrameMaps(Shows):
    """One output frame's attention at the selected layer (`batch`, from `batch.batch_maps`) and the
    frame it was computed on (`image`: the frame resized and cropped to the patch grid)."""

    index: int  # output frame number
    time: float  # seconds: index / fps
    source_index: int  # decoded frame number (consecutive output frames may share one)
    batch: BatchMaps
    image: Image.Image
    threshold: float
    _masks: np.ndarray | None = field(default=None, repr=False)

    @property
    def maps(self) -> np.ndarray:
        """float32 (H, gh, gw): every head's map at the selected layer."""
        return self.batch.maps

    @property
    def mean(self) -> np.ndarray:
        """float32 (gh, gw): the mean of heads (DINO's video)."""
        return self.batch.mean

    @property
    def masks(self) -> np.ndarray:
        """bool (H, gh, gw): per head, the patches holding `threshold` of its attention (DINO's masks)."""
        if self._masks is None:
            self._masks = self.batch.masks(self.threshold)
        return self._masks

    def picture(
        self,
        view: str = "mean",
        *,
        head: int = 0,
        alpha: float = OPACITY.default,
        cmap: str = CMAP.default,
        side_by_side=False,
    ) -> np.ndarray:
        """The frame drawn as `view` (VIDEO_VIEWS), enlarged by a whole factor when its shorter side is
        under MIN_SIDE px; `side_by_side`: the frame itself on the left ("stacked": above, for a phone's
        narrow page). uint8 (H', W' or 2W' or 2H', W', 3)."""
        view = check_video_view(view)
        head = check_head(head, self.maps.shape[0]) if view in ("head", "masks") else head
        return self.drawn(view, head=head, alpha=alpha, cmap=cmap, side_by_side=side_by_side)

    def drawn(self, view: str, *, head: int, alpha: float, cmap: str, side_by_side: bool | str) -> np.ndarray:
        """`picture` of a view and head already checked (`check_video_view`, `check_head`): what a whole
        video draws per frame, nothing checked again. uint8 (H', W' or 2W', 3)."""
        img = np.asarray(self.image, dtype=np.uint8)
        if view == "mean":
            out = overlay(img, self.mean, alpha=alpha, cmap=cmap)
        elif view == "head":
            out = overlay(img, self.maps[head], alpha=alpha, cmap=cmap)
        elif view == "masks":
            out = mask_overlay(img, self.masks[head])
        else:
            out = masks_figure(img, self.masks)
        if side_by_side:
            out = np.concatenate([img, out], axis=0 if side_by_side == STACKED else 1)
        k = enlargement((img.shape[1], img.shape[0]), MIN_SIDE)  # the frame's factor, whatever is beside it
        return upsample(out, k) if k > 1 else out
