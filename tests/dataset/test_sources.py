"""Spec of attention.dataset.sources: a folder, a glob and a file give their images in the order
`sorted()` gives their paths (the same item i on every rank and run); an imagefolder read through
`datasets` gives the images `datasets` itself loads, undecoded; what cannot be read is refused
naming what is accepted."""

from __future__ import annotations

import io
from pathlib import Path

import datasets
import numpy as np
import pytest
from PIL import Image

from attention.dataset.sources import FileSource, HFSource, open_source
from attention.errors import InputError


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    for rel in ("b/2.png", "a.jpg", "b/10.PNG", "c/d/z.webp", "notes.txt", "a/x.bmp"):
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".txt"):
            p.write_text("not an image")
        else:
            fmt = {"jpg": "JPEG", "png": "PNG", "webp": "WEBP", "bmp": "BMP"}[p.suffix.lower()[1:]]
            Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(p, format=fmt)
    return d


def test_a_folder_gives_every_image_below_it_in_sorted_order(folder):
    src = open_source(str(folder))
    expected = sorted(str(p) for p in folder.rglob("*") if p.suffix.lower() in (".png", ".jpg", ".webp", ".bmp"))
    assert isinstance(src, FileSource) and list(src.paths) == expected and len(src) == 5
    assert [src.name(i) for i in range(len(src))] == [str(Path(p).relative_to(folder)) for p in expected]
    assert src.get(0) == expected[0] and src.spec == {"kind": "files", "root": str(folder), "items": 5}


def test_a_glob_and_a_single_file(folder):
    src = open_source(f"{folder}/b/*.*")
    assert [Path(p).name for p in src.paths] == sorted(["10.PNG", "2.png"])
    one = open_source(str(folder / "a.jpg"))
    assert len(one) == 1 and one.name(0) == "a.jpg"


def test_an_imagefolder_reads_as_datasets_loads_it_undecoded(folder, tmp_path):
    d = tmp_path / "imgs" / "cats"
    d.mkdir(parents=True)
    for i in range(3):
        Image.new("RGB", (4 + i, 4), (i * 60, 0, 0)).save(d / f"{i}.png")
    src = open_source(f"imagefolder:{tmp_path / 'imgs'}")
    theirs = datasets.load_dataset("imagefolder", data_dir=str(tmp_path / "imgs"), split="train")
    assert isinstance(src, HFSource) and len(src) == len(theirs) == 3 and src.column == "image"
    for i in range(3):
        got = src.get(i)
        img = Image.open(io.BytesIO(got) if isinstance(got, bytes) else got)
        assert img.size == theirs[i]["image"].size and np.array_equal(np.asarray(img), np.asarray(theirs[i]["image"]))


def test_what_cannot_be_read_is_refused_naming_what_is_accepted(tmp_path):
    with pytest.raises(InputError, match="is not a file, folder or glob that exists; accepted: a folder of images"):
        open_source(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no image files"):
        open_source(str(tmp_path / "empty"))
    with pytest.raises(InputError, match="No such folder"):
        open_source(f"imagefolder:{tmp_path / 'missing'}")
