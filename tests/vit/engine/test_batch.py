"""Spec of attention.vit.engine.batch: one forward per batch of same-grid images gives, per sample, what
`attention_maps` gives on that image alone (fp32, within 1e-5) whatever the batch size, rows equal
to an independent softmax(q k^T * scale), and the CLS embedding timm's `forward_features` gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from attention.errors import InputError
from attention.vit.engine.batch import GridBuckets, batch_maps, group_by_grid
from attention.vit.engine.extract import attention_maps
from attention.vit.engine.preprocess import Preprocess, aspect_buckets
from attention.vit.models.loader import load_vit
from tests.vit.engine.test_extract import photo, reference, tiny_vit

ROOT = Path(__file__).resolve().parents[3]
DIGITS = sorted(str(p) for p in (ROOT / "examples" / "digits").glob("*.png"))[:5]
PHOTOS = sorted(str(p) for p in (ROOT / "examples" / "photos").glob("*.jpg"))[:6]


@pytest.fixture(scope="module")
def mnist_vit():
    return load_vit("mnist_vit", device="cpu")


def run(model, files, resolution, batch_size, **kw):
    """{file: BatchMaps} through Preprocess, group_by_grid and batch_maps."""
    prep = Preprocess.of(model, resolution)
    items = [(f, prep(f)) for f in files]
    out = {}
    for group in group_by_grid(items, batch_size, grid_of=lambda t: t[1].grid):
        xs = torch.stack([p.x for _, p in group])
        assert len({p.grid for _, p in group}) == 1 and len(group) <= batch_size
        out.update(zip([f for f, _ in group], batch_maps(model, xs, **kw)))
    return out


@pytest.mark.parametrize("batch_size", [1, 3, 16])
def test_each_sample_equals_attention_maps_on_its_image_alone(mnist_vit, batch_size):
    tiny = tiny_vit(reg_tokens=2)
    for model, files, res in ((mnist_vit, DIGITS, "auto"), (tiny, PHOTOS, 64)):
        got = run(model, files, res, batch_size, layer=-2, every_layer=True, keep_tokens=True)
        assert sorted(got) == sorted(files)  # every image once
        for f in files:
            ref, r = attention_maps(model, f, layer=-2, resolution=res), got[f]
            assert r.grid == ref.grid and r.layer == ref.layer
            np.testing.assert_allclose(r.weights, ref.weights, atol=1e-5)
            np.testing.assert_allclose(r.maps, ref.maps, atol=1e-5)
            np.testing.assert_allclose(r.mean, ref.mean, atol=1e-5)
            np.testing.assert_array_equal(r.masks(0.6), ref.arrays(0.6)["masks"])
            x = Preprocess.of(model, res)(f).x[None]
            with torch.no_grad():
                cls = model.forward_features(x)[0, 0].numpy()  # timm's own forward, the image alone
            np.testing.assert_allclose(r.embedding, cls, atol=1e-5)
            np.testing.assert_allclose(r.attention_maps(ref.image).maps, ref.maps, atol=1e-5)


def test_rows_equal_an_independent_softmax_per_query():
    model = tiny_vit()
    imgs = [photo(48, 64, seed=s) for s in range(3)]
    prep = Preprocess.of(model, None)
    xs = torch.stack([prep(a).x for a in imgs])
    queries = ["cls", (1, 2), (5, 7)]
    got = batch_maps(model, xs, query=queries, every_layer=True)
    for a, q, r in zip(imgs, queries, got):
        mats, _ = reference(model, a)
        i = 0 if q == "cls" else 1 + q[0] * r.grid[1] + q[1]
        for layer, m in enumerate(mats):
            np.testing.assert_allclose(r.weights[layer], m[:, i].numpy(), atol=1e-5)
        assert r.query == q


def test_one_layer_only_by_default_and_tokens_only_when_asked(mnist_vit):
    xs = torch.stack([Preprocess.of(mnist_vit)(f).x for f in DIGITS[:2]])
    r = batch_maps(mnist_vit, xs, layer=1)[0]
    assert r.recorded == (1,) and r.maps.shape == (4, 7, 7) and r.tokens is None
    with pytest.raises(InputError, match="keep_tokens"):
        _ = r.embedding
    with pytest.raises(InputError, match="every_layer"):
        r.attention_maps(None)


def test_bad_batches_are_clear(mnist_vit):
    with pytest.raises(InputError, match=r"\(B, C, H, W\)"):
        batch_maps(mnist_vit, torch.zeros(1, 28, 28))
    with pytest.raises(InputError, match="one per image"):
        batch_maps(mnist_vit, torch.zeros(2, 1, 28, 28), query=["cls", (1, 1), (2, 2)])
    with pytest.raises(InputError, match="off the 7x7 grid"):
        batch_maps(mnist_vit, torch.zeros(2, 1, 28, 28), query=(7, 0))
    with pytest.raises(InputError, match="Batch size"):
        GridBuckets(0)


def test_grouping_puts_each_item_in_one_batch_of_one_grid():
    grids = [(i % 3, 7) for i in range(20)]
    batches = list(group_by_grid(range(20), 4, grid_of=lambda i: grids[i]))
    assert sorted(i for b in batches for i in b) == list(range(20))
    assert all(len(b) <= 4 and len({grids[i] for i in b}) == 1 for b in batches)
    assert sum(len(b) == 4 for b in batches) == 3 * (7 // 4)  # full batches first, one partial per grid at the end


def test_aspect_buckets_make_a_few_grids_each_an_exact_resize_then_attention_maps_native():
    model = tiny_vit()
    assert aspect_buckets(64, 8, 5) == ((16, 8), (11, 8), (8, 8), (8, 11), (8, 16))  # w/h 1/2 .. 2, shorter side 64 px
    prep = Preprocess.of(model, 64, buckets=5)
    shapes = {(75, 101): (8, 11), (101, 75): (11, 8), (60, 60): (8, 8), (40, 200): (8, 16), (33, 34): (8, 8)}
    for (h, w), grid in shapes.items():
        p = prep(photo(h, w))
        assert p.grid == grid and p.shown.size == (grid[1] * 8, grid[0] * 8)
        r = batch_maps(model, p.x[None])[0]
        np.testing.assert_allclose(r.maps, attention_maps(model, p.shown, resolution="native").maps, atol=1e-5)
    with pytest.raises(InputError, match="buckets"):
        Preprocess.of(model, "dino480", buckets=3)
