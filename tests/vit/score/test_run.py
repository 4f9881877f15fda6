"""`python -m attention evaluate`: a folder of images with a folder of masks scored into shards, resumed without
recomputing, one table whose means and intervals are the per-item scores' (checked with `statistics`), bad input
refused before any shard."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest
from PIL import Image

from attention.__main__ import main
from attention.errors import InputError
from attention.planted import planted_batch
from attention.vit.models.loader import load_vit
from attention.vit.score import score_maps, scorer
from attention.vit.score.data import open_items, read_mask


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """5 planted digits as PNGs (28 x 28) with their masks as PNGs of the same names."""
    root = tmp_path_factory.mktemp("planted")
    (root / "img").mkdir()
    (root / "mask").mkdir()
    batch = planted_batch(5, n_digits=1, cells=(1, 1), seed=7)
    for i, p in enumerate(batch):
        Image.fromarray(p.image).save(root / "img" / f"d{i}.png")
        Image.fromarray(np.where(p.masks[0], 255, 0).astype(np.uint8)).save(root / "mask" / f"d{i}.png")
    return root, batch


def test_a_folder_with_masks_is_scored_resumed_and_tabled(folder, tmp_path, capsys):
    root, batch = folder
    out = tmp_path / "ev"
    args = ["evaluate", str(root / "img"), "--model", "mnist_vit", "--maps", "chefer,random", "--masks"]
    args += [str(root / "mask"), "--out", str(out), "--shard-size", "2", "--no-progress", "--threads", "1"]
    args += ["--protocols", "perturbation"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "5 items scored, 0 failed" in first and "| chefer |" in first
    assert sorted(p.name for p in (out / "scores").iterdir()) == [f"shard-{k:05d}.jsonl" for k in range(3)]
    (out / "scores" / "shard-00001.jsonl").unlink()  # an interrupted run: one shard missing
    assert main(args) == 0
    assert "this run: 2 items" in capsys.readouterr().out  # only the missing shard's two items
    table = json.loads((out / "table.json").read_text())
    sc = scorer(load_vit("mnist_vit", device="cpu"))
    per = [
        score_maps(sc, p.image, ["chefer"], mask=p.masks[0], protocols=["perturbation"]).maps["chefer"].figures()
        for p in batch
    ]
    pos = [f["auc_positive"] for f in per]
    mean, lo, hi, n = table["figures"]["chefer"]["auc_positive"]
    half = 1.96 * statistics.stdev(pos) / len(pos) ** 0.5
    assert n == 5 and mean == pytest.approx(statistics.fmean(pos), abs=1e-6)
    assert (lo, hi) == (pytest.approx(mean - half, abs=1e-6), pytest.approx(mean + half, abs=1e-6))
    assert table["figures"]["chefer"]["pointing"][0] == pytest.approx(statistics.fmean(f["pointing"] for f in per))


def test_bad_maps_and_sources_are_refused_before_any_shard(folder, tmp_path, capsys):
    root, _ = folder
    out = tmp_path / "bad"
    assert main(["evaluate", str(root / "img"), "--maps", "lrp", "--out", str(out), "--no-progress"]) == 2
    assert "accepted: attention, rollout" in capsys.readouterr().err and not (out / "scores").exists()
    assert main(["evaluate", "planted:0", "--out", str(out)]) == 2
    assert "planted:N" in capsys.readouterr().err
    assert main(["evaluate", str(tmp_path / "nowhere"), "--out", str(out)]) == 2


def test_masks_read_as_objects_without_the_void_label():
    voc = np.array([[0, 15, 255], [15, 0, 0]], np.uint8)  # VOC: 0 background, 15 person, 255 void
    assert read_mask(Image.fromarray(voc, "L")).tolist() == [[False, True, False], [True, False, False]]
    items = open_items("planted:3", cells=(2, 2), digits=2, captions=True)
    it = items[1]
    assert len(it.prompts) == 2 and it.target == it.prompts[0] and it.mask.shape == (56, 56)


def test_an_extract_runs_folder_is_read_as_the_source_it_read(folder, tmp_path):
    root, _ = folder
    run = tmp_path / "extract_out"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"source": {"kind": "files", "root": str(root / "img"), "items": 5}}))
    items = open_items(str(run), masks=str(root / "mask"))
    assert len(items) == 5 and items[0].name == "d0.png" and items[0].mask.shape == (28, 28)
    (run / "run.json").write_text(json.dumps({"source": {"kind": "video"}}))
    with pytest.raises(InputError, match="names no source"):
        open_items(str(run))


def test_a_saved_dataset_gives_its_masks_and_labels(folder, tmp_path):
    import datasets

    root, batch = folder
    mask_of = lambda p: Image.fromarray(np.where(p.masks[0], 255, 0).astype(np.uint8))  # noqa: E731
    ds = datasets.Dataset.from_dict(
        {
            "image": [Image.fromarray(p.image) for p in batch],
            "mask": [mask_of(p) for p in batch],
            "label": [int(p.classes[0]) for p in batch],
        },
        features=datasets.Features(
            {"image": datasets.Image(), "mask": datasets.Image(), "label": datasets.Value("int64")}
        ),
    )
    ds.save_to_disk(str(tmp_path / "saved"))
    items = open_items(str(tmp_path / "saved"), mask_column="mask", label_column="label")
    assert len(items) == 5
    for i, p in enumerate(batch):
        assert np.array_equal(items[i].mask, p.masks[0]) and items[i].target == int(p.classes[0])
    with pytest.raises(InputError, match="no column 'segmentation'"):
        open_items(str(tmp_path / "saved"), mask_column="segmentation")
