"""`extract` on models without a CLS token (issue 31, item 5): the maps are of the query `attention_maps`
uses by default (SigLIP's attention-pool query; else the centre patch), that query is recorded in run.json,
in each row and in the shards' Parquet metadata, and the embedding column is the model's own pooled
embedding (timm's `forward_head(..., pre_logits=True)`: GAP or the attention pool's output), named as such,
never token 0 (a register or patch (0, 0))."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from attention.dataset import extract, open_source
from attention.vit.extract import attention_maps
from attention.vit.preprocess import Preprocess
from bench.common import random_vit

ROOT = Path(__file__).resolve().parents[2]
PHOTOS = str(ROOT / "examples" / "photos" / "c*.jpg")


def no_cls_vit(pool: str, reg_tokens: int = 0) -> torch.nn.Module:
    """A tiny ViT without a class token, pooled by `pool` ("map": SigLIP's attention pool; "avg": GAP)."""
    kw = dict(class_token=False, global_pool=pool, reg_tokens=reg_tokens, no_embed_class=True)
    m = random_vit("vit_tiny_patch16_224", img_size=64, patch_size=8, embed_dim=48, depth=3, num_heads=3, **kw)
    with torch.no_grad():  # peaked attention, so another query is far off
        for blk in m.blocks:
            blk.attn.qkv.weight[:96] *= 4.0
    return m


def rows(out: Path) -> pd.DataFrame:
    return pd.read_parquet(out / "shards").set_index("name")


def timm_embedding(model: torch.nn.Module, image) -> np.ndarray:
    """timm's own pooled embedding of the image alone: forward_head(forward_features(x), pre_logits=True)."""
    with torch.no_grad():
        x = Preprocess.of(model, 64)(image).x[None]
        return model.forward_head(model.forward_features(x), pre_logits=True)[0].numpy()


@pytest.mark.parametrize(
    "pool, regs, query, kind",
    [("map", 0, "pool", "map"), ("avg", 0, "the centre patch", "avg"), ("avg", 2, "the centre patch", "avg")],
)
def test_extract_uses_attention_maps_default_query_and_records_it_and_the_embedding(tmp_path, pool, regs, query, kind):
    model = no_cls_vit(pool, regs)
    src = open_source(PHOTOS)
    extract(src, model, tmp_path, model_name="tiny", resolution=64, batch_size=2, shard_size=4, workers=0)
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["query"] == query and run["embedding"].startswith(f"{kind}:")
    meta = pq.read_schema(next((tmp_path / "shards").glob("*.parquet"))).metadata
    assert meta[b"query"].decode() == query and meta[b"embedding"].decode() == run["embedding"]
    got = rows(tmp_path)
    for i in range(len(src)):
        row, ref = got.loc[src.name(i)], attention_maps(model, src.get(i), resolution=64)  # its default query
        assert row["query"] == (ref.query if isinstance(ref.query, str) else f"{ref.query[0]},{ref.query[1]}")
        np.testing.assert_allclose(np.asarray(row["maps"]).reshape(row["maps_shape"]), ref.maps, atol=1e-5)
        emb = np.asarray(row["embedding"])
        np.testing.assert_allclose(emb, timm_embedding(model, src.get(i)), atol=1e-5)
    if pool == "map":
        assert ref.query == "pool"


def test_an_explicit_query_is_recorded(tmp_path):
    model = no_cls_vit("map")
    src = open_source(PHOTOS)
    extract(src, model, tmp_path, model_name="tiny", query=(1, 2), resolution=64, shard_size=4, workers=0)
    assert json.loads((tmp_path / "run.json").read_text())["query"] == "1,2"
    row = rows(tmp_path).iloc[0]
    assert row["query"] == "1,2"
    ref = attention_maps(model, src.get(int(row["id"])), resolution=64, query=(1, 2))
    np.testing.assert_allclose(np.asarray(row["maps"]).reshape(row["maps_shape"]), ref.maps, atol=1e-5)
