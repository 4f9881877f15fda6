"""Spec of attention.images: any source and mode decodes to RGB with EXIF honoured; bad,
truncated and oversized files are refused with a clear ImageError; resize and crop to patches."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from attention.errors import ImageError, InputError
from attention.images import check_resolution, load_image, target_size, to_tensor


def encode(img: Image.Image, fmt: str = "PNG", **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "P", "CMYK", "I;16", "I", "F", "1", "LA"])
def test_every_mode_becomes_rgb(mode):
    img = Image.new(mode, (20, 10))
    out = load_image(img)
    assert out.mode == "RGB" and out.size == (20, 10)


def test_sixteen_bit_is_scaled_not_clipped():
    a = np.full((4, 4), 65535, np.uint16)
    a[0, 0] = 0
    out = np.asarray(load_image(Image.fromarray(a)))
    assert out[1, 1, 0] == 255 and out[0, 0, 0] == 0


def test_transparency_is_composited_on_white_under_dark_content_and_says_so():
    img = Image.new("RGBA", (4, 4), (255, 0, 0, 0))
    img.putpixel((1, 1), (20, 20, 20, 255))  # dark ink
    out = load_image(encode(img))
    assert np.asarray(out)[0, 0].tolist() == [255, 255, 255] and np.asarray(out)[1, 1].tolist() == [20, 20, 20]
    assert out.info["background"] == "white"


def test_light_content_on_transparency_is_composited_on_black():
    """A white digit drawn on a transparent canvas: on white it would vanish (a blank map)."""
    a = np.zeros((28, 28, 4), np.uint8)
    a[6:22, 12:16] = (255, 255, 255, 255)
    a[5, 12:16] = (255, 255, 255, 128)  # a half-transparent edge: blended onto black
    out = load_image(encode(Image.fromarray(a)))
    px = np.asarray(out)
    assert px[0, 0].tolist() == [0, 0, 0] and px[10, 13].tolist() == [255, 255, 255]
    assert abs(int(px[5, 13, 0]) - 128) <= 1 and out.info["background"] == "black"


def test_an_opaque_alpha_channel_flattens_nothing():
    out = load_image(encode(Image.new("RGBA", (4, 4), (250, 250, 250, 255))))
    assert np.asarray(out)[0, 0].tolist() == [250, 250, 250] and "background" not in out.info


def test_exif_orientation_is_honoured():
    img = Image.new("RGB", (30, 10), (0, 0, 255))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 on display
    out = load_image(encode(img, "JPEG", exif=exif.tobytes()))
    assert out.size == (10, 30)


@pytest.mark.parametrize(
    "arr",
    [np.zeros((5, 6), np.uint8), np.zeros((5, 6, 1), np.uint8), np.zeros((5, 6, 4), np.uint8), np.ones((5, 6, 3))],
)
def test_arrays_are_accepted(arr):
    assert load_image(arr).size == (6, 5)


@pytest.mark.parametrize(
    "arr", [np.zeros((5, 6, 2), np.uint8), np.zeros((5,), np.uint8), np.full((3, 3), 300, np.int32)]
)
def test_arrays_that_are_not_images_are_refused(arr):
    with pytest.raises(ImageError, match="accepted"):
        load_image(arr)


def test_non_image_and_truncated_files_are_refused(tmp_path):
    with pytest.raises(ImageError, match="not an image"):
        load_image(b"%PDF-1.4 hello")
    jpeg = encode(Image.fromarray((np.random.default_rng(0).random((64, 64, 3)) * 255).astype(np.uint8)), "JPEG")
    with pytest.raises(ImageError, match="truncated or corrupt"):
        load_image(jpeg[: len(jpeg) // 2])
    with pytest.raises(ImageError, match="No such image file"):
        load_image(tmp_path / "missing.png")
    with pytest.raises(ImageError, match="accepted"):
        load_image(12)


def test_decompression_bomb_is_refused_from_the_header(tmp_path):
    """A 20000 x 20000 PNG (400 M pixels) is refused before any pixel is decoded."""
    path = tmp_path / "bomb.png"
    Image.new("1", (20000, 20000)).save(path)  # 1-bit: a small file
    assert path.stat().st_size < 2_000_000
    with pytest.raises(ImageError, match="over the limit"):
        load_image(path)
    with pytest.raises(ImageError, match="over the limit"):
        load_image(Image.new("L", (100, 100)), max_pixels=9_999)


def test_resize_keeps_aspect_then_crops_to_patches():
    assert target_size((640, 480), 16, 480) == ((640, 480), (640, 480))
    assert target_size((1000, 500), 16, 480) == ((960, 480), (960, 480))
    assert target_size((101, 75), 8, None) == ((101, 75), (96, 72))
    img = Image.new("RGB", (300, 200), (255, 0, 0))
    x, shown = to_tensor(img, patch_size=16, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), resolution=100)
    assert x.shape == (1, 3, 96, 144) and shown.size == (144, 96)
    assert abs(float(x[0, 0, 0, 0]) - 1.0) < 1e-6 and abs(float(x[0, 1, 0, 0]) + 1.0) < 1e-6
    g, _ = to_tensor(img, patch_size=4, mean=(0.1307,), std=(0.3081,), resolution=28)
    assert g.shape == (1, 1, 28, 40)


@pytest.mark.parametrize(
    "value, expected", [(None, None), ("native", None), (" Native ", None), (480, 480), ("224", 224)]
)
def test_resolution_values(value, expected):
    assert check_resolution(value, 16) == expected


@pytest.mark.parametrize("value", ["huge", 8, 5000, -1, "dino224"])
def test_bad_resolutions_are_refused(value):
    with pytest.raises(InputError, match="Resolution .*'auto', 'native',? (or )?'dino480'"):
        check_resolution(value, 16)


def test_dino480_squashes_to_480_square_and_is_accepted_by_name():
    assert check_resolution("dino480", 16) == "dino480" and check_resolution(" DINO480 ", 14) == "dino480"
    assert target_size((500, 375), 16, "dino480") == ((480, 480), (480, 480))
    assert target_size((500, 375), 14, "dino480") == ((480, 480), (476, 476))


def test_dino480_equals_torchvision_resize_as_in_dinos_script():
    """visualize_attention.py: transforms.Resize((480, 480)) on the PIL image, ToTensor, Normalize."""
    from torchvision import transforms

    img = Image.fromarray((np.random.default_rng(3).random((375, 500, 3)) * 255).astype(np.uint8))
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    x, shown = to_tensor(img, patch_size=14, mean=mean, std=std, resolution="dino480", crop="top-left")
    ref = transforms.Compose([transforms.Resize((480, 480)), transforms.ToTensor(), transforms.Normalize(mean, std)])(
        img
    )
    assert x.shape == (1, 3, 476, 476) and shown.size == (476, 476)
    np.testing.assert_allclose(x[0].numpy(), ref[:, :476, :476].numpy(), atol=1e-5)


@pytest.mark.parametrize("crop, left, top", [("center", 2, 1), ("top-left", 0, 0)])
def test_crop_to_the_patch_grid_from_the_centre_or_the_top_left(crop, left, top):
    a = (np.random.default_rng(4).random((75, 101, 3)) * 255).astype(np.uint8)
    x, shown = to_tensor(Image.fromarray(a), patch_size=8, mean=(0, 0, 0), std=(1, 1, 1), resolution=None, crop=crop)
    assert shown.size == (96, 72) and np.array_equal(np.asarray(shown), a[top : top + 72, left : left + 96])
    np.testing.assert_allclose(x[0].permute(1, 2, 0).numpy() * 255, a[top : top + 72, left : left + 96], atol=1e-3)


def test_unknown_crop_is_refused():
    with pytest.raises(InputError, match="Crop 'middle' is not accepted; accepted: 'top-left', 'center', 'resize'"):
        to_tensor(Image.new("RGB", (32, 32)), patch_size=8, mean=(0,), std=(1,), resolution=None, crop="middle")


@pytest.mark.parametrize(
    "size, resolution, expected",
    [
        ((500, 375), 768, (1024, 768)),  # landscape: 48 rows, floor(500 * 768 / (375 * 16)) = 64 columns
        ((375, 500), 768, (576, 768)),  # portrait: 48 rows, floor(375 * 768 / (500 * 16)) = 36 columns
        ((500, 375), 500, (656, 496)),  # int(500 / 16) = 31 rows, floor(500 * 500 / (375 * 16)) = 41 columns
        ((500, 375), None, (496, 368)),  # native: floor(375 / 16) rows, floor(500 / 16) columns, resized
        ((4000, 20), 32, (16 * 400, 32)),  # a strip keeps its aspect
        ((20, 4000), 32, (16, 32)),  # at least one column
    ],
)
def test_dinov3_rule_resizes_to_whole_patches_keeping_the_aspect_without_cropping(size, resolution, expected):
    assert target_size(size, 16, resolution, "resize") == (expected, expected)


def test_dinov3_rule_equals_the_notebooks_resize_transform():
    """facebookresearch/dinov3 notebooks/pca.ipynb: resize_transform (TF.resize to (h_patches * 16,
    w_patches * 16) on the PIL image, TF.to_tensor), then TF.normalize with ImageNet's mean and std."""
    import torchvision.transforms.functional as TF

    img = Image.fromarray((np.random.default_rng(5).random((375, 500, 3)) * 255).astype(np.uint8))
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    w, h = img.size
    h_patches, w_patches = int(768 / 16), int((w * 768) / (h * 16))
    ref = TF.normalize(TF.to_tensor(TF.resize(img, (h_patches * 16, w_patches * 16))), mean=mean, std=std)
    x, shown = to_tensor(img, patch_size=16, mean=mean, std=std, resolution=768, crop="resize", resize="bilinear")
    assert x.shape == (1, 3, 768, 1024) == (1, *ref.shape) and shown.size == (1024, 768)
    np.testing.assert_allclose(x[0].numpy(), ref.numpy(), atol=1e-5)
