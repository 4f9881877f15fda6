"""Feature views from the attention pass: block outputs, PCA, similarity and norms, each checked
against an independent computation from the model's own modules."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch

from attention.errors import InputError
from attention.images import to_tensor
from attention.vit.engine import features
from attention.vit.engine.extract import attention_maps
from attention.vit.models.loader import load_vit
from tests.conftest import DIGIT


def block_outputs(model: torch.nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Every block's output tokens (1, N, d) by running the model's modules by hand; the last one
    through the final norm, which must equal `forward_features`."""
    param = next(model.parameters())
    x = x.to(param.device, param.dtype)  # the model's own device and precision (fp16 on a GPU)
    with torch.no_grad():
        t = model.norm_pre(model.patch_drop(model._pos_embed(model.patch_embed(x))))
        outs = []
        for blk in model.blocks:
            t = blk(t)
            outs.append(t)
        outs[-1] = model.norm(outs[-1])
        assert torch.allclose(outs[-1], model.forward_features(x), atol=1e-5)
    return outs


def test_the_pass_records_every_blocks_output_and_the_last_after_the_norm(digit_pass):
    model = load_vit("mnist_vit")
    cfg = model.pretrained_cfg
    x, _ = to_tensor(digit_pass.base.image.convert("L"), patch_size=4, mean=cfg["mean"], std=cfg["std"], resolution=28)
    want = block_outputs(model, x)
    assert digit_pass.tokens.dtype == np.float16 and digit_pass.tokens.shape == (4, 50, want[0].shape[-1])
    for layer, w in enumerate(want):
        want = w[0].float().cpu().numpy()
        np.testing.assert_allclose(digit_pass.tokens[layer].astype(np.float32), want, rtol=2e-3, atol=2e-3)


def reference(tokens: np.ndarray, grid, query, P):
    t = torch.tensor(tokens, dtype=torch.float64)
    patches = t[P:]
    x = patches - patches.mean(0)
    evals, evecs = torch.linalg.eigh(x.T @ x)  # ascending
    comps = x @ evecs[:, -3:].flip(1)  # the first three principal components
    unit = (comps - comps.min(0).values) / (comps.max(0).values - comps.min(0).values)
    q = t[0] if query == "cls" else patches[query[0] * grid[1] + query[1]]
    sim = torch.nn.functional.cosine_similarity(patches, q[None], dim=1)
    return unit.reshape(*grid, 3).numpy(), sim.reshape(grid).numpy(), torch.linalg.norm(patches, dim=1).reshape(grid)


@pytest.mark.parametrize("query", ["cls", (3, 2)])
def test_pca_similarity_and_norms_match_an_independent_computation(digit_pass, query):
    f = digit_pass.feature_maps(query, layer=2)
    pca, sim, nrm = reference(digit_pass.tokens[2].astype(np.float32), (7, 7), query, 1)
    for ch in range(3):  # up to sign: a flipped component is 1 - the other after min-max scaling
        got = f["pca"][..., ch]
        assert min(np.abs(got - pca[..., ch]).max(), np.abs(got - (1 - pca[..., ch])).max()) < 1e-4
    np.testing.assert_allclose(f["similarity"], sim, atol=1e-5)
    np.testing.assert_allclose(f["norms"], nrm.numpy(), rtol=1e-5)
    assert {k: v.dtype for k, v in f.items()} == dict.fromkeys(("pca", "similarity", "norms"), np.float32)
    if query != "cls":
        assert f["similarity"][query] == pytest.approx(1.0, abs=1e-6)


def test_dinov2_with_registers_features_skip_the_registers_and_match_forward_features():
    torch.manual_seed(0)
    model = timm.create_model(
        "vit_small_patch14_reg4_dinov2", pretrained=False, num_classes=0, dynamic_img_size=True, depth=3
    ).eval()
    image = np.random.default_rng(0).integers(0, 255, (140, 98, 3), dtype=np.uint8)
    with features.recording(model) as rec:
        res = attention_maps(model, image, resolution=None)
    P, grid = model.num_prefix_tokens, res.grid
    assert P == 5 and grid == (10, 7)
    cfg = model.pretrained_cfg
    x, _ = to_tensor(res.image, patch_size=14, mean=cfg["mean"], std=cfg["std"], resolution=None)
    want = block_outputs(model, x)[-1][0].float().cpu().numpy()  # forward_features: (P + 70, d)
    tokens = rec.tokens
    np.testing.assert_allclose(tokens[-1].astype(np.float32), want, rtol=2e-3, atol=2e-3)
    f = features.feature_maps(tokens, grid, P, -1, (4, 4))
    pca, sim, nrm = reference(tokens[-1].astype(np.float32), grid, (4, 4), P)
    for ch in range(3):  # up to sign, on the patch tokens only (the 4 registers and CLS left out)
        got = f["pca"][..., ch]
        assert min(np.abs(got - pca[..., ch]).max(), np.abs(got - (1 - pca[..., ch])).max()) < 1e-4
    np.testing.assert_allclose(f["similarity"], sim, atol=1e-5)
    np.testing.assert_allclose(f["norms"], nrm.numpy(), rtol=1e-5)


def test_high_norm_tokens_are_those_over_twice_the_median():
    n = np.array([[1.0, 1.1, 0.9], [1.0, 5.0, 1.2]])
    assert features.high_norm(n).tolist() == [[False, False, False], [False, True, False]]


def test_pca_without_background_zeroes_the_patches_below_the_threshold(digit_pass):
    f = digit_pass.tokens[-1, 1:].astype(np.float32)
    full = features.pca(f, (7, 7))
    fg = features.pca(f, (7, 7), background=0.5)
    back = full[..., 0] < 0.5
    assert back.any() and (fg[back] == 0).all() and (fg[~back].max(0) == 1).all()


def test_pca_colours_put_the_border_low():
    grid = (6, 6)
    inside = np.zeros(grid, bool)
    inside[1:-1, 1:-1] = True
    f = np.random.default_rng(0).normal(size=(36, 8)).astype(np.float32)
    f[inside.reshape(-1), 0] += 10  # the first component separates the inside from the border
    c = features.pca(f, grid)[..., 0]
    assert c[inside].mean() > c[~inside].mean()


def test_bad_layers_queries_and_thresholds_are_refused(digit_pass):
    with pytest.raises(InputError, match="Layer 9 is out of range; this model has 4 layers: 0 to 3"):
        digit_pass.feature_maps("cls", 9)
    with pytest.raises(InputError, match=r"Patch \(7, 0\) is off the 7x7 grid"):
        digit_pass.feature_maps((7, 0), -1)
    with pytest.raises(InputError, match="accepted: 0 to 1"):
        features.pca(digit_pass.tokens[-1, 1:], (7, 7), background=1.5)


def test_recording_is_per_thread_on_a_shared_model(digit_pass):
    """Two passes at once on one model each record only their own tokens."""
    from concurrent.futures import ThreadPoolExecutor

    from PIL import Image

    model = load_vit("mnist_vit")
    imgs = [np.asarray(Image.open(DIGIT)), np.asarray(Image.open(DIGIT))[::-1].copy()]

    def run(img):
        with features.recording(model) as rec:
            attention_maps(model, img)
        return rec.tokens

    alone = [run(i) for i in imgs]
    with ThreadPoolExecutor(4) as ex:
        together = list(ex.map(run, imgs * 8))
    for i, t in enumerate(together):
        np.testing.assert_array_equal(t, alone[i % 2])


def object_features(grid=(9, 12), d=24, seed=0):
    """Patch features (gh*gw, d) of a synthetic scene: an object (a block in the middle) whose patches
    share one direction and parts along two others, on a background of small noise; and its mask."""
    rng = np.random.default_rng(seed)
    gh, gw = grid
    obj = np.zeros(grid, bool)
    obj[2:7, 3:9] = True
    f = rng.normal(0, 0.2, (gh * gw, d))
    parts = rng.normal(0, 1, (gh * gw, 2)) @ rng.normal(0, 1, (2, d))
    f[obj.reshape(-1)] += 4 * rng.normal(0, 1, d) + parts[obj.reshape(-1)]
    return f.astype(np.float32), obj


def test_median3_is_scipys_medfilt2d():
    from scipy.signal import medfilt2d

    m = np.random.default_rng(1).random((7, 11)).astype(np.float32)
    np.testing.assert_array_equal(features.median3(m), medfilt2d(m, kernel_size=3))


def test_the_foreground_stand_in_finds_the_object_median_filtered_as_the_notebook_filters_its_scores():
    from scipy.signal import medfilt2d

    f, obj = object_features()
    want = medfilt2d(obj.astype(np.float32), kernel_size=3) > 0.5  # the block without its four corners
    assert want.sum() == obj.sum() - 4
    np.testing.assert_array_equal(features.foreground(f, obj.shape), want)
    np.testing.assert_array_equal(features.foreground(-f, obj.shape), want)  # the sign does not matter


def test_dinov3_pca_is_the_notebooks_whitened_pca_on_the_foreground():
    """facebookresearch/dinov3 notebooks/pca.ipynb: PCA(n_components=3, whiten=True).fit(fg patches),
    transform(all patches), sigmoid(2x), background * 0."""
    from sklearn.decomposition import PCA

    f, obj = object_features()
    rgb, fg = features.pca_foreground(f, obj.shape, obj)
    want = 1 / (1 + np.exp(-2 * PCA(n_components=3, whiten=True).fit(f[obj.reshape(-1)]).transform(f)))
    want[~obj.reshape(-1)] = 0
    assert rgb.shape == (9, 12, 3) and rgb.dtype == np.float32 and (fg == obj).all()
    np.testing.assert_allclose(rgb.reshape(-1, 3), want, atol=1e-5)
    rgb2, fg2 = features.pca_foreground(f, obj.shape)  # its own foreground: the stand-in's
    assert (fg2 == features.foreground(f, obj.shape)).all() and (rgb2[~fg2] == 0).all() and rgb2[fg2].min() > 0
    with pytest.raises(InputError, match="does not match the 9x12 patch grid"):
        features.pca_foreground(f, obj.shape, obj[:, :5])


def test_dinov3_pca_with_hardly_any_foreground_fits_every_patch_and_masks_nothing():
    from sklearn.decomposition import PCA

    f, obj = object_features()
    few = np.zeros_like(obj)
    few[0, :3] = True
    rgb, fg = features.pca_foreground(f, obj.shape, few)
    assert fg.all()
    want = 1 / (1 + np.exp(-2 * PCA(n_components=3, whiten=True).fit(f).transform(f)))
    np.testing.assert_allclose(rgb.reshape(-1, 3), want, atol=1e-5)


def test_unknown_pca_styles_are_refused_naming_the_accepted_ones():
    with pytest.raises(InputError, match="accepted: minmax, dinov3"):
        features.check_pca_style("fancy")
    assert features.check_pca_style(" DINOv3 ") == "dinov3"
