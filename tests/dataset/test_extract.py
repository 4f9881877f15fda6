"""Spec of `python -m attention extract` (attention.dataset): a folder of shipped digits and photos
gives, image by image, what `attention_maps` gives on each image alone and timm's own CLS embedding
(fp32 on CPU, within 1e-5), whatever the batch size; `torchrun --nproc_per_node 2` (gloo) writes the
single process's result, every image once; a corrupt file is reported and skipped; an interrupted
run resumes without recomputing finished shards; a shard that cannot be written stops the run with its
error; workers default to the cores; the output opens with pandas and `datasets`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from attention.__main__ import main
from attention.dataset import extract, open_source
from attention.dataset import run as run_module
from attention.dataset.decode import auto_workers
from attention.errors import InputError
from attention.vit.extract import attention_maps, threshold_masks
from attention.vit.models import load_vit
from attention.vit.preprocess import Preprocess
from tests.vit.test_extract import tiny_vit

ROOT = Path(__file__).resolve().parents[2]
DIGITS = sorted((ROOT / "examples" / "digits").glob("*.png"))[:5]
PHOTOS = [ROOT / "examples" / "photos" / n for n in ("chelsea.jpg", "coffee.jpg", "grace_hopper.jpg")]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """5 digits and 3 photos (three grids at mnist_vit's 28 px), in a folder."""
    d = tmp_path_factory.mktemp("images")
    for p in DIGITS + PHOTOS:
        shutil.copy(p, d / p.name)
    return d


def read(out: Path) -> pd.DataFrame:
    """Every shard's rows (pandas alone), indexed by name."""
    return pd.read_parquet(out / "shards").set_index("name")


def arr(row, key: str) -> np.ndarray:
    return np.asarray(row[key]).reshape(row[f"{key}_shape"])


def assert_same(a: pd.DataFrame, b: pd.DataFrame, atol: float = 0.0, ids: bool = True) -> None:
    """The same images (by name; with `ids`, at the same positions of the source) with the same arrays."""
    a, b = a.sort_index(), b.sort_index()
    assert list(a.index) == list(b.index) and (not ids or list(a["id"]) == list(b["id"]))
    for name in a.index:
        for key in ("maps", "mean", "embedding"):
            np.testing.assert_allclose(arr(a.loc[name], key), arr(b.loc[name], key), atol=atol, rtol=0)
        np.testing.assert_array_equal(arr(a.loc[name], "masks"), arr(b.loc[name], "masks"))


def cli(*args: str) -> int:
    return main(["extract", *map(str, args), "--no-progress"])


def test_a_folder_through_extract_equals_attention_maps_image_by_image(folder, tmp_path, capsys):
    out = tmp_path / "out"
    args = ("--model", "mnist_vit", "--out", out, "--layer", "2", "--shard-size", "3", "--batch-size", "4")
    assert cli(folder, *args, "--workers", "1", "--threshold", "0.5") == 0
    assert "8 images in 3 shards" in capsys.readouterr().out
    rows, model = read(out), load_vit("mnist_vit", device="cpu")
    assert sorted(rows.index) == sorted(p.name for p in DIGITS + PHOTOS)
    assert len({(r.grid_h, r.grid_w) for r in rows.itertuples()}) == 3  # digits 7x7 and two photo grids
    for p in DIGITS + PHOTOS:
        ref, row = attention_maps(model, p, layer=2), rows.loc[p.name]
        np.testing.assert_allclose(arr(row, "maps"), ref.maps, atol=1e-5)
        np.testing.assert_allclose(arr(row, "mean"), ref.mean, atol=1e-5)
        np.testing.assert_array_equal(arr(row, "masks"), threshold_masks(ref.maps, 0.5))
        with torch.no_grad():  # timm's own forward of the image alone
            cls = model.forward_features(Preprocess.of(model)(p).x[None])[0, 0].numpy()
        np.testing.assert_allclose(arr(row, "embedding"), cls, atol=1e-5)
        assert (row.width, row.height) == ref.image.size
    index = pd.read_parquet(out / "index.parquet")
    assert list(index["id"]) == list(range(8)) and (index["row"] >= 0).all() and index["error"].isna().all()
    assert json.loads((out / "index.json").read_text())["images"] == 8


def test_a_registers_vit_and_pca_through_the_python_api(tmp_path):
    model = tiny_vit(reg_tokens=2)
    src = open_source(str(ROOT / "examples" / "photos" / "c*.jpg"))
    s = extract(src, model, tmp_path, model_name="tiny", resolution=64, pca=True, batch_size=3, shard_size=4, workers=0)
    rows = read(tmp_path)
    assert s.images == len(src) == len(rows) and not s.failed
    for i in range(len(src)):
        row = rows.loc[src.name(i)]
        ref = attention_maps(model, src.get(i), resolution=64)
        np.testing.assert_allclose(arr(row, "maps"), ref.maps, atol=1e-5)
        assert arr(row, "pca").shape == (*ref.grid, 3) and 0 <= arr(row, "pca").min() <= arr(row, "pca").max() <= 1


def test_buckets_bring_every_image_to_one_of_a_few_grids(folder, tmp_path):
    assert cli(folder, "--model", "mnist_vit", "--out", tmp_path, "--buckets", "3", "--workers", "0") == 0
    rows, model = read(tmp_path), load_vit("mnist_vit", device="cpu")
    prep = Preprocess.of(model, "auto", buckets=3)
    assert {(r.grid_h, r.grid_w) for r in rows.itertuples()} <= set(prep.buckets) == {(14, 7), (7, 7), (7, 14)}
    for p in PHOTOS:  # the photos' 3:2 and 5:6 go to 7x14 and 7x7
        ref = attention_maps(model, prep(p).shown, resolution="native")
        np.testing.assert_allclose(arr(rows.loc[p.name], "maps"), ref.maps, atol=1e-5)


def test_the_same_output_whatever_the_batch_size(folder, tmp_path):
    outs = []
    for bs in (1, 3, 16):
        outs.append(tmp_path / f"bs{bs}")
        assert cli(folder, "--model", "mnist_vit", "--out", outs[-1], "--batch-size", bs, "--workers", "0") == 0
    for o in outs[1:]:
        assert_same(read(outs[0]), read(o), atol=1e-6)


@pytest.mark.slow
@pytest.mark.subprocess
def test_torchrun_two_processes_write_the_single_process_result(folder, tmp_path):
    common = ["--model", "mnist_vit", "--shard-size", "2", "--batch-size", "4", "--workers", "0", "--no-progress"]
    one, two = tmp_path / "one", tmp_path / "two"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each torchrun process (OMP_NUM_THREADS=1), so the sums run in the same order
    try:
        assert main(["extract", str(folder), "--out", str(one), *common]) == 0
    finally:
        torch.set_num_threads(threads)
    r = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc_per_node", "2"]
        + ["-m", "attention", "extract", str(folder), "--out", str(two), *common],
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("8 images in 4 shards") == 1 and "on 2 processes" in r.stdout  # rank 0 alone reports
    assert_same(read(one), read(two))  # bit for bit
    assert sorted(read(two)["id"]) == list(range(8))  # every image once
    ranks = {k: json.loads((two / "done" / f"shard-{k:05d}.json").read_text())["rank"] for k in range(4)}
    assert ranks == {0: 0, 1: 1, 2: 0, 3: 1}  # shard k on rank k mod 2


def test_a_corrupt_file_is_reported_and_skipped(folder, tmp_path, capsys):
    bad = tmp_path / "in"
    shutil.copytree(folder, bad)
    (bad / "broken.jpg").write_bytes(PHOTOS[0].read_bytes()[:3000])  # truncated JPEG
    (bad / "notes.png").write_text("not an image")
    assert cli(bad, "--model", "mnist_vit", "--out", tmp_path / "out", "--workers", "1") == 0
    text = capsys.readouterr().out
    assert "8 images" in text and "failed: 2" in text
    assert "broken.jpg: Image data is truncated" in text and "notes.png: " in text and "not an image" in text
    index = pd.read_parquet(tmp_path / "out" / "index.parquet").set_index("name")
    assert len(index) == 10 and index.loc["broken.jpg", "row"] == -1 and "truncated" in index.loc["broken.jpg", "error"]
    assert len(read(tmp_path / "out")) == 8


def test_an_interrupted_run_resumes_without_recomputing_finished_shards(folder, tmp_path, monkeypatch):
    model, src, out = load_vit("mnist_vit", device="cpu"), open_source(str(folder)), tmp_path / "out"
    kw = dict(model_name="mnist_vit", batch_size=2, shard_size=3, workers=0, progress=False)
    real, seen = run_module.batch_maps, []

    def dies_on_third(model, xs, **k):
        if len(seen) == 2:
            raise KeyboardInterrupt
        seen.append(len(xs))
        return real(model, xs, **k)

    monkeypatch.setattr(run_module, "batch_maps", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        extract(src, model, out, **kw)
    assert sorted(p.relative_to(out).as_posix() for p in out.glob("*/shard-*")) == [
        "done/shard-00000.json",
        "shards/shard-00000.parquet",
    ]
    first = (out / "shards" / "shard-00000.parquet").stat().st_mtime_ns
    counted = []

    def counts(model, xs, **k):
        counted.append(len(xs))
        return real(model, xs, **k)

    monkeypatch.setattr(run_module, "batch_maps", counts)
    s = extract(src, model, out, **kw)
    assert sum(counted) == 5 and s.done_now == 5 and s.skipped == 1  # shard 0's 3 images are not recomputed
    assert (out / "shards" / "shard-00000.parquet").stat().st_mtime_ns == first
    monkeypatch.setattr(run_module, "batch_maps", real)
    whole = tmp_path / "whole"
    extract(src, model, whole, **kw)
    assert_same(read(out), read(whole))
    with pytest.raises(InputError, match="other settings.*layer"):
        extract(src, model, out, **kw, layer=1)


def test_a_shard_that_cannot_be_written_stops_the_run_with_its_error(folder, tmp_path, monkeypatch):
    def disk_full(out, k, *a, **kw):  # on the writer thread
        raise OSError(f"No space left on device (shard {k})")

    monkeypatch.setattr(run_module, "write_shard", disk_full)
    kw = dict(model_name="mnist_vit", batch_size=2, shard_size=3, workers=0, progress=False)
    with pytest.raises(OSError, match=r"No space left on device \(shard 0\)"):
        extract(open_source(str(folder)), load_vit("mnist_vit", device="cpu"), tmp_path, **kw)
    assert not list(tmp_path.glob("done/*"))


def test_workers_default_to_what_the_cores_allow(monkeypatch):
    auto = auto_workers
    assert [auto("cpu", n) for n in (1, 2, 7, 8, 16, 64, 128)] == [0, 0, 0, 1, 2, 8, 8]  # the forward takes the cores
    assert [auto("cuda", n) for n in (1, 2, 4, 16)] == [1, 1, 3, 8]  # decoding feeds the GPU
    monkeypatch.setattr(os, "cpu_count", lambda: 32)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # torchrun's two processes share the cores
    assert auto("cpu") == 2
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert auto("cpu") == 4


def test_a_local_imagefolder_through_datasets_and_the_output_through_datasets(folder, tmp_path):
    datasets = pytest.importorskip("datasets")
    a, b = tmp_path / "files", tmp_path / "hf"
    assert cli(folder, "--model", "mnist_vit", "--out", a, "--workers", "0") == 0
    assert cli(f"imagefolder:{folder}", "--model", "mnist_vit", "--out", b, "--workers", "1") == 0
    assert_same(read(a), read(b), ids=False)  # the dataset's own row order
    ds = datasets.load_dataset(str(b / "shards"), split="train").with_format("numpy")  # a folder of Parquet files
    rows = read(b)
    assert len(ds) == 8 and ds[0]["maps_shape"].tolist() == [4, *rows.loc[ds[0]["name"], "maps_shape"][1:]]
    np.testing.assert_array_equal(ds[0]["maps"].reshape(ds[0]["maps_shape"]), arr(rows.loc[ds[0]["name"]], "maps"))


def test_sources_that_are_not_there_are_clear(tmp_path):
    with pytest.raises(InputError, match="not a file, folder or glob"):
        open_source(str(tmp_path / "nope"))
    with pytest.raises(InputError, match="holds no image files"):
        open_source(str(tmp_path))
    assert cli(tmp_path / "nope", "--model", "mnist_vit", "--out", tmp_path / "o") == 2
