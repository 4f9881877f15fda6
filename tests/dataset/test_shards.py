"""Spec of attention.dataset.shards: a shard is a Parquet file pyarrow and pandas read back exactly
(arrays flattened with their shapes), marked done only once written; the index lists every item once,
failures with their reasons, unfinished shards as missing; a resumed run must ask the same."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from attention.dataset import shards
from attention.errors import InputError


def row(i: int, rng, pca: bool = False) -> dict:
    H, gh, gw = 2, 3, 4
    r = {
        "id": i,
        "name": f"img{i}.png",
        "width": gw * 8,
        "height": gh * 8,
        "grid_h": gh,
        "grid_w": gw,
        "query": "cls" if i % 2 else "1,2",
        "maps": rng.random((H, gh, gw), dtype=np.float32),
        "mean": rng.random((gh, gw), dtype=np.float32),
        "masks": rng.random((H, gh, gw)) > 0.5,
        "embedding": rng.random(5, dtype=np.float32),
    }
    return {**r, "pca": rng.random((gh, gw, 3), dtype=np.float32)} if pca else r


@pytest.mark.parametrize("pca", [False, True])
def test_a_shard_reads_back_exactly_with_pyarrow_and_pandas(tmp_path, pca):
    rng = np.random.default_rng(0)
    rows = [row(i, rng, pca) for i in (3, 1, 2)]
    shards.write_shard(tmp_path, 0, rows, [{"id": 0, "name": "bad.png", "reason": "not an image"}], pca, seconds=1.5)
    assert shards.is_done(tmp_path, 0) and not shards.is_done(tmp_path, 1)
    df = pd.read_parquet(tmp_path / "shards")  # the folder holds the shards only
    assert df["id"].tolist() == [1, 2, 3]  # sorted by id
    by_id = {r["id"]: r for r in rows}
    for _, got in df.iterrows():
        want = by_id[got["id"]]
        for k in ("maps", "mean", "masks", "embedding", *(["pca"] if pca else [])):
            np.testing.assert_array_equal(np.asarray(got[k]).reshape(got[f"{k}_shape"]), want[k])
    assert ("pca" in pq.read_schema(shards.shard_path(tmp_path, 0)).names) == pca
    marker = json.loads(shards.marker_path(tmp_path, 0).read_text())
    assert marker["rows"] == 3 and marker["failures"][0]["reason"] == "not an image" and marker["seconds"] == 1.5


def test_the_index_lists_every_item_once_and_the_missing_shards(tmp_path):
    rng = np.random.default_rng(1)
    shards.write_shard(tmp_path, 0, [row(0, rng), row(1, rng)], [], False)
    shards.write_shard(tmp_path, 2, [row(5, rng)], [{"id": 4, "name": "x.png", "reason": "truncated"}], False)
    index = shards.write_index(tmp_path, 3, {"model": "m"})
    t = pd.read_parquet(tmp_path / "index.parquet")
    assert t["id"].tolist() == [0, 1, 4, 5] and t["row"].tolist() == [0, 1, -1, 0]
    assert t["error"].tolist()[2] == "truncated" and t["shard"].tolist()[3] == "shards/shard-00002.parquet"
    assert index["images"] == 3 and index["failed"] == 1 and index["missing_shards"] == [1]
    assert json.loads((tmp_path / "index.json").read_text()) == index


def test_a_resumed_run_must_ask_the_same(tmp_path):
    shards.check_run(tmp_path, {"model": "a", "layer": -1}, write=True)
    shards.check_run(tmp_path, {"model": "a", "layer": -1}, write=False)
    with pytest.raises(InputError, match="layer: -1 before, 2 now"):
        shards.check_run(tmp_path, {"model": "a", "layer": 2}, write=False)
