"""The Space's default view is DINO's own (issue 31, item 1): `dino_vits16` at resolution "auto" (480 px)
and at any number of px gives the maps DINO's visualize_attention.py computes with `--image_size R`.

The oracle is written here from DINO's script, not from this package:

    transform = pth_transforms.Compose([
        pth_transforms.Resize(args.image_size),        # an int: the shorter side, bilinear on the PIL image
        pth_transforms.ToTensor(),
        pth_transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    ])
    img = transform(img)
    w, h = img.shape[1] - img.shape[1] % patch_size, img.shape[2] - img.shape[2] % patch_size
    img = img[:, :w, :h].unsqueeze(0)

then DINO's `get_last_selfattention` by a hand-written forward of the state dict with DINO's
interpolate_pos_encoding (`tests.vit.engine.test_fidelity.reference_cls_rows`). The weights are random but
peaked (q and k scaled, position embeddings a large smooth sinusoid), so a resampling filter or a
one-pixel size difference moves the maps far beyond the tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from attention.config import EXAMPLES_DIR
from attention.vit.engine.extract import attention_maps
from attention.vit.models.loader import load_vit
from tests.vit.engine.test_fidelity import deviation, hub_model, reference_cls_rows

TOL = 1e-4  # of each head's peak
PATCH = 16
DINO_MEAN, DINO_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # visualize_attention.py's Normalize
SIZES = [(500, 375), (375, 500), (224, 224), (333, 250)]  # four aspect ratios


def dino_script_input(img: Image.Image, image_size: int) -> torch.Tensor:
    """visualize_attention.py's preprocessing of `img` with `--image_size image_size`: (1, 3, H', W')."""
    from torchvision import transforms as pth_transforms

    transform = pth_transforms.Compose(
        [
            pth_transforms.Resize(image_size),
            pth_transforms.ToTensor(),
            pth_transforms.Normalize(DINO_MEAN, DINO_STD),
        ]
    )
    t = transform(img)
    w, h = t.shape[1] - t.shape[1] % PATCH, t.shape[2] - t.shape[2] % PATCH
    return t[:, :w, :h].unsqueeze(0)


def photo(size: tuple[int, int]) -> Image.Image:
    """A shipped photo (chelsea, the cat) fitted to `size` (W, H): real image content at each aspect ratio."""
    from PIL import ImageOps

    return ImageOps.fit(Image.open(EXAMPLES_DIR / "photos" / "chelsea.jpg").convert("RGB"), size, Image.LANCZOS)


@pytest.fixture(scope="module")
def dino(tmp_path_factory):
    """load_vit("dino_vits16") from a temporary hub cache of random peaked weights, and its state dict."""
    with hub_model(tmp_path_factory, "vit_small_patch16_224.dino") as sd:
        yield load_vit("dino_vits16", device="cpu"), sd


@pytest.mark.parametrize("resolution", ["auto", 320, 480, 640])
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_dino_vits16_maps_are_dinos_own_at_auto_and_any_resolution(dino, size, resolution):
    model, sd = dino
    img = photo(size)
    res = attention_maps(model, img, resolution=resolution)
    x = dino_script_input(img, 480 if resolution == "auto" else resolution)
    heads = model.blocks[0].attn.num_heads
    rows = reference_cls_rows(sd, x, PATCH, heads, offset=0.1, antialias=False)
    ref = rows.reshape(len(model.blocks), heads, x.shape[2] // PATCH, x.shape[3] // PATCH).numpy()
    assert res.grid == ref.shape[2:], f"grid {res.grid}, DINO's script makes {ref.shape[2:]}"
    np.testing.assert_allclose(np.asarray(res.image, np.float32)[0, 0] / 255, _unnormalised(x)[0, 0], atol=0.6 / 255)
    dev = deviation(res.layers, ref)
    print(f"{size[0]}x{size[1]} at {resolution}: grid {res.grid}, max deviation {dev:.2e} of the row peak")
    assert dev <= TOL


def _unnormalised(x: torch.Tensor) -> np.ndarray:
    """(H', W', 3) in [0, 1]: the script's input before Normalize (the image the maps are drawn over)."""
    m, s = (torch.tensor(v)[:, None, None] for v in (DINO_MEAN, DINO_STD))
    return (x[0] * s + m).permute(1, 2, 0).numpy()


def test_the_family_says_the_resize_and_the_normalisation():
    """One resize per family, read from it: DINO's families resize bilinear (torchvision's Resize on a PIL
    image) and normalise with ImageNet's mean and std; timm models keep bicubic and their own."""
    from attention.vit.models.registry import FAMILIES

    for name in ("dino", "dinov2", "dinov2_reg", "dinov3"):
        assert FAMILIES[name].resize == "bilinear", name
    for name in ("dino", "dinov2", "dinov2_reg"):
        assert (FAMILIES[name].mean, FAMILIES[name].std) == (DINO_MEAN, DINO_STD)
    assert FAMILIES["timm"].resize == "bicubic" and FAMILIES["timm"].mean is None
