"""The one preprocessing of the package: an image as a model sees it. `attention_maps` (one image),
the batched path (`batch`: datasets, videos) and class relevance all go through `Preprocess`: a
fixed-size model's fit to its trained size, the resize, the family's crop to the patch grid, the
normalisation; `prepare` adds the compute budget check for one image.

    prep = Preprocess.of(model, resolution="auto")
    p = prep("cat.jpg")                                  # Prepared: x (C, H, W), shown, grid
    x, shown, grid = prepare(model, "cat.jpg", "auto", MAX_TOKENS, max_gflop=None)   # x (1, C, H, W)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image, ImageOps

from attention.errors import InputError
from attention.images import MAX_TOKENS, RESIZES, ImageSource, check_resolution, load_image, to_tensor
from attention.vit.backbone import describe
from attention.vit.engine.cost import check_budget
from attention.vit.engine.request import RESOLUTION


def fixed_size(model: torch.nn.Module) -> tuple[int, int] | None:
    """(H, W) px when `model` takes only its trained input size (a strict patch embedding: BEiT, relpos
    ViTs, any timm ViT created without dynamic_img_size), else None (any size)."""
    return describe(model).fixed


@dataclass(frozen=True)
class Prepared:
    """One image as the model sees it: x float32 (C, H, W), H and W multiples of the patch; `shown`
    the RGB image x shows; grid (gh, gw) = (H / p, W / p)."""

    x: torch.Tensor
    shown: Image.Image
    grid: tuple[int, int]


def aspect_buckets(resolution: int, patch: int, k: int) -> tuple[tuple[int, int], ...]:
    """k patch grids (gh, gw) whose shorter side is `resolution` px, aspect ratios w/h spread evenly in
    log scale from 1/2 to 2 (k = 1: the square)."""
    s = max(1, resolution // patch)
    out: list[tuple[int, int]] = []
    for i in range(k):
        a = 2.0 ** (-1 + 2 * i / (k - 1)) if k > 1 else 1.0
        g = (s, max(s, round(s * a))) if a >= 1 else (max(s, round(s / a)), s)
        if g not in out:
            out.append(g)
    return tuple(out)


@dataclass(frozen=True)
class Preprocess:
    """The preprocessing of one model, as a small picklable value (DataLoader workers run it
    without the model): a fixed-size model's fit, resize, the family's crop to the patch grid, normalise.

    buckets: a few grids (`aspect_buckets`); each image is first resized (the family's filter) to the one of
    nearest aspect ratio, exactly, so a dataset makes only those grids (full batches); the result is
    then `attention_maps(model, that resized image, resolution="native")`'s."""

    patch_size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    resolution: int | str | None  # as `check_resolution` returns it
    crop: str = "center"
    max_tokens: int = MAX_TOKENS
    buckets: tuple[tuple[int, int], ...] = ()
    fixed: tuple[int, int] | None = None  # (H, W) px: a model taking only its trained size (BEiT, relpos)
    resize: str = "bicubic"  # the family's filter (`models.Family.resize`, `images.RESIZES`): every resize here

    @classmethod
    def of(
        cls,
        model: torch.nn.Module,
        resolution: int | str | None = RESOLUTION,
        max_tokens: int = MAX_TOKENS,
        buckets: int = 0,
    ):
        """The preprocessing of `model` at `resolution` (shorter side in px, "auto", "native"/None or
        "dino480", `attention_maps`'); with `buckets` > 0, that many aspect-ratio grids at `resolution`
        (an int, or "auto"). InputError for a resolution or buckets the model does not take."""
        bb = describe(model)
        patch = bb.patch_size
        auto = isinstance(resolution, str) and resolution.strip().lower() == "auto"
        res = bb.default_resolution if auto else check_resolution(resolution, patch)
        crop, fixed = bb.crop, bb.fixed
        if fixed is not None and (buckets or (not auto and res is not None)):
            asked = f"Resolution {resolution!r}" + (f" with {buckets} buckets" if buckets else "")
            raise InputError(
                f"{asked} is not accepted by {type(model).__name__}: it takes only its trained input size, "
                f"{fixed[1]}x{fixed[0]} px (its relative-position tables are built for that grid); accepted: "
                "resolution 'auto' or 'native', no buckets."
            )
        grids = ()
        if buckets:
            if not isinstance(res, int) or not 1 <= buckets <= 64:
                raise InputError(
                    f"Buckets {buckets} at resolution {resolution!r}: accepted 1-64 buckets with a resolution in px "
                    "or 'auto' (not 'native' or 'dino480')."
                )
            grids = aspect_buckets(res, patch, buckets)
        res = None if fixed is not None else res
        return cls(patch, bb.mean, bb.std, res, crop, max_tokens, grids, fixed, bb.resize)

    def __call__(self, image: ImageSource) -> Prepared:
        """Decode (`load_image`) and preprocess; ImageError for what cannot be read or is too small/large."""
        return self.decoded(load_image(image))

    def input_size(self, img: Image.Image) -> tuple[int, int]:
        """(w, h) px of decoded `img` as it enters the resize: a fixed-size model's trained size, else its own."""
        return img.size if self.fixed is None else (self.fixed[1], self.fixed[0])

    def decoded(self, img: Image.Image) -> Prepared:
        """Preprocess an image `load_image` has decoded (RGB); ImageError when it is too small or large."""
        res = self.resolution
        if self.fixed is not None:  # fitted to the one grid its tables know, as attention_maps does
            img = ImageOps.fit(img, (self.fixed[1], self.fixed[0]), RESIZES[self.resize])
        if self.buckets:
            w, h = img.size
            gh, gw = min(self.buckets, key=lambda g: abs(np.log((w / h) / (g[1] / g[0]))))
            img, res = img.resize((gw * self.patch_size, gh * self.patch_size), RESIZES[self.resize]), None
        x, shown = to_tensor(
            img,
            patch_size=self.patch_size,
            mean=self.mean,
            std=self.std,
            resolution=res,
            crop=self.crop,
            max_tokens=self.max_tokens,
            resize=self.resize,  # type: ignore[arg-type]
        )
        return Prepared(x[0], shown, (x.shape[2] // self.patch_size, x.shape[3] // self.patch_size))


def prepare(
    model: torch.nn.Module, image: ImageSource, resolution, max_tokens: int, max_gflop: float | None, **price
) -> tuple[torch.Tensor, Image.Image, tuple[int, int]]:
    """The model's input for one image, by the one preprocessing (`Preprocess`: resolution, the
    family's crop, a fixed-size model's fit), after the compute budget check (`cost.check_budget`:
    BudgetError naming the largest resolution that fits, when `max_gflop` is not None):
    (x float32 (1, C, H, W), the shown RGB image (W, H), grid (H / p, W / p)). price: `check_budget`'s
    gflop and job (another job than a forward: a relevance job)."""
    prep = Preprocess.of(model, resolution, max_tokens)
    img = load_image(image)
    if max_gflop is not None:
        device = str(next(model.parameters()).device)
        check_budget(
            model,
            prep.input_size(img),
            prep.resolution,
            max_gflop,
            name=getattr(model, "alias", "this model"),
            device=device,
            max_tokens=max_tokens,
            **price,
        )
    p = prep.decoded(img)
    return p.x[None], p.shown, p.grid
