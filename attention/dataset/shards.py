"""The files of an extraction: Parquet shards any Parquet reader opens, done markers, the index.

OUT/
  run.json                       what was asked (model, layer, resolution, threshold, source, shard
                                 size): a resumed run must ask the same
  shards/shard-00000.parquet     one row per image of items [0, S), sorted by id (S = shard size);
                                 the folder holds nothing else: `pd.read_parquet("OUT/shards")`
  done/shard-00000.json          its done marker: rows, failures with reasons, seconds, rank
  index.parquet                  every item once: id, name, shard, row in the shard (-1: failed), error
  index.json                     totals, the shards, the failures, run.json's settings

A shard row: id (int64, the item's position in the source), name, width/height (px of the image as
the model saw it), grid_h/grid_w, query (the token or "row,col" whose attention the maps are), and each
array flattened with its shape: maps float32 (H, gh, gw), mean float32 (gh, gw), masks bool (H, gh, gw),
embedding float32 (D,) (the CLS token, or for a model without CLS its own pooling: run.json's and the
schema metadata's "embedding" says which), pca float32 (gh, gw, 3) when asked.
`np.asarray(row["maps"]).reshape(row["maps_shape"])`.
A shard is written to a temporary name and renamed, then its marker likewise: a shard with a
marker is finished and a resumed run skips it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from attention.errors import InputError

ARRAYS = {"maps": pa.float32(), "mean": pa.float32(), "masks": pa.bool_(), "embedding": pa.float32()}


def schema(pca: bool, metadata: dict[str, str] | None = None) -> pa.Schema:
    """The shards' columns (pca and pca_shape only when PCA was asked), and `metadata` (the query the maps
    are of, what the embedding is: run.json's)."""
    arrays = {**ARRAYS, **({"pca": pa.float32()} if pca else {})}
    fields = [
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        *(pa.field(k, pa.int32()) for k in ("width", "height", "grid_h", "grid_w")),
        pa.field("query", pa.string()),
    ]
    for k, t in arrays.items():
        fields += [pa.field(k, pa.list_(t)), pa.field(f"{k}_shape", pa.list_(pa.int32()))]
    return pa.schema(fields, metadata=metadata)


def shard_name(k: int) -> str:
    return f"shard-{k:05d}"


def shard_path(out: Path, k: int) -> Path:
    return out / "shards" / f"{shard_name(k)}.parquet"


def marker_path(out: Path, k: int) -> Path:
    return out / "done" / f"{shard_name(k)}.json"


def is_done(out: Path, k: int) -> bool:
    """Whether shard k was finished (its marker and its Parquet file are there)."""
    return marker_path(out, k).exists() and shard_path(out, k).exists()


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # a dot name: Parquet readers skip it
    write(tmp)
    os.replace(tmp, path)


def write_shard(
    out: Path, k: int, rows: list[dict], failures: list[dict], pca: bool, metadata: dict | None = None, **meta
) -> None:
    """Write shard k: `rows` (dicts of scalars and numpy arrays, see the module's docstring) with the Parquet
    schema's `metadata`, then its marker with `failures` ({id, name, reason} each) and `meta` (seconds, rank, ...)."""
    rows = sorted(rows, key=lambda r: r["id"])
    sch = schema(pca, metadata)
    cols: dict[str, list] = {f.name: [] for f in sch}
    for r in rows:
        for f in sch:
            if f.name.endswith("_shape"):
                cols[f.name].append(list(np.shape(r[f.name[: -len("_shape")]])))
            elif f.name in ARRAYS or f.name == "pca":
                cols[f.name].append(np.ravel(r[f.name]))
            else:
                cols[f.name].append(r[f.name])
    table = pa.table({f.name: pa.array(cols[f.name], type=f.type) for f in sch}, schema=sch)
    _atomic_write(shard_path(out, k), lambda p: pq.write_table(table, p))
    marker = {"shard": k, "rows": len(rows), "failures": sorted(failures, key=lambda f: f["id"]), **meta}
    _atomic_write(marker_path(out, k), lambda p: p.write_text(json.dumps(marker, indent=1)))


def check_run(out: Path, config: dict, *, write: bool) -> None:
    """Compare `config` with OUT/run.json (InputError naming what differs); with `write`, create it
    when it is not there yet (rank 0)."""
    path = out / "run.json"
    if path.exists():
        old = json.loads(path.read_text())
        diff = {k: (old.get(k), v) for k, v in config.items() if old.get(k) != v}
        if diff:
            what = "; ".join(f"{k}: {a!r} before, {b!r} now" for k, (a, b) in diff.items())
            raise InputError(
                f"{out} holds a run with other settings ({what}); accepted: the same settings to resume, "
                "or another --out."
            )
    elif write:
        _atomic_write(path, lambda p: p.write_text(json.dumps(config, indent=1)))


def write_index(out: Path, n_shards: int, config: dict) -> dict:
    """index.parquet (every item: id, name, shard, row, error) and index.json from the finished
    shards; returns index.json's content. Shards not finished are listed as missing."""
    ids, names, shards, rows, errors = [], [], [], [], []
    listed, failures, missing = [], [], []
    for k in range(n_shards):
        if not is_done(out, k):
            missing.append(k)
            continue
        marker = json.loads(marker_path(out, k).read_text())
        file = shard_path(out, k).relative_to(out).as_posix()
        t = pq.read_table(shard_path(out, k), columns=["id", "name"])
        n = t.num_rows
        ids += t["id"].to_pylist()
        names += t["name"].to_pylist()
        shards += [file] * n
        rows += list(range(n))
        errors += [None] * n
        for f in marker["failures"]:
            for col, v in ((ids, f["id"]), (names, f["name"]), (shards, file), (rows, -1), (errors, f["reason"])):
                col.append(v)
        failures += marker["failures"]
        listed.append({"file": file, "rows": n, "failures": len(marker["failures"])})
    order = np.argsort(np.array(ids, dtype=np.int64), kind="stable")
    table = pa.table(
        {
            "id": pa.array(np.array(ids, dtype=np.int64)[order]),
            "name": pa.array([names[i] for i in order], pa.string()),
            "shard": pa.array([shards[i] for i in order], pa.string()),
            "row": pa.array(np.array(rows, dtype=np.int32)[order]),
            "error": pa.array([errors[i] for i in order], pa.string()),
        }
    )
    _atomic_write(out / "index.parquet", lambda p: pq.write_table(table, p))
    index = {
        **config,
        "images": sum(s["rows"] for s in listed),
        "failed": len(failures),
        "shards": listed,
        "missing_shards": missing,
        "failures": failures,
    }
    _atomic_write(out / "index.json", lambda p: p.write_text(json.dumps(index, indent=1)))
    return index
