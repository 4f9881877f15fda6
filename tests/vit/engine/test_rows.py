"""Spec of attention.vit.engine.rows, the engine: one fused forward of a batch records each sample's query
row in every layer, equal to softmax(q k^T * scale) computed by hand from each block's own weights
(`test_extract.reference`), a different query per sample; kept q and k rebuild every row; asked for
some layers, it records only those; a query off the tokens is refused."""

from __future__ import annotations

import pytest
import torch

from attention.errors import InputError
from attention.images import load_image, to_tensor
from attention.vit.engine import rows
from tests.vit.engine.test_extract import photo, reference, tiny_vit


def batch(model, images):
    cfg = model.pretrained_cfg
    p = model.patch_embed.patch_size[0]
    kw = dict(patch_size=p, mean=cfg["mean"], std=cfg["std"], resolution=None)
    return torch.cat([to_tensor(load_image(im), **kw)[0] for im in images])


@pytest.fixture(scope="module")
def model():
    return tiny_vit(reg_tokens=2)


@pytest.fixture(scope="module")
def images():
    return [photo(64, 64, seed=s) for s in range(3)]


def test_each_samples_row_in_every_layer_equals_its_hand_computed_attention(model, images):
    x = batch(model, images)
    index = [0, 1, 30]  # CLS, a register, a patch: one query per sample
    scores, qk = rows.query_rows(model, x, index)
    assert scores.shape == (3, 4, 3, 3 + 64) and scores.dtype == torch.float32 and qk is None
    for b, im in enumerate(images):
        mats, _ = reference(model, im)
        for layer, a in enumerate(mats):
            torch.testing.assert_close(torch.softmax(scores[b, layer], -1), a[:, index[b]], rtol=1e-4, atol=1e-6)


def test_kept_q_and_k_rebuild_every_row_of_every_layer(model, images):
    x = batch(model, images[:1])
    _, qk = rows.query_rows(model, x, 0, keep_qk=True)
    mats, _ = reference(model, images[0])
    for (q, k), a in zip(qk[0], mats):
        full = torch.softmax(q @ k.transpose(-2, -1) * model.blocks[0].attn.scale, -1)
        torch.testing.assert_close(full, a, rtol=1e-4, atol=1e-6)


def test_asked_for_some_layers_it_records_those_only(model, images, monkeypatch):
    x = batch(model, images[:2])
    every, _ = rows.query_rows(model, x, 5)
    computed = []
    scores = rows.batch_scores
    monkeypatch.setattr(rows, "batch_scores", lambda *a: computed.append(1) or scores(*a))
    rec = rows.run_pass(model, x, 5, False, layers=(1, 3))
    assert len(computed) == 2 and rec.seen == [True] * 4
    torch.testing.assert_close(rec.rows_cpu(), every[:, [1, 3]])
    assert rec.scale[3] == pytest.approx(model.blocks[3].attn.head_dim ** -0.5)


def test_a_query_off_the_tokens_or_a_wrong_count_is_refused(model, images):
    x = batch(model, images[:2])
    with pytest.raises(InputError, match=r"out of range; accepted: 0 to 66"):
        rows.query_rows(model, x, 67)
    with pytest.raises(InputError, match="3 query indices for a batch of 2"):
        rows.query_rows(model, x, [0, 1, 2])
    with pytest.raises(InputError, match="expected a batch"):
        rows.query_rows(model, x[0], 0)
