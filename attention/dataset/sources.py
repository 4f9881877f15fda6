"""Where a dataset's images come from: a folder, a glob, or a Hugging Face `datasets` dataset.

Every source is a fixed, ordered list of items (sorted paths; a dataset's row order), so item i is
the same image on every rank and in every run (shards and resumption rely on it).

    src = open_source("photos/")                     # every image file below the folder, sorted
    src = open_source("photos/**/*.jpg")             # a glob (recursive)
    src = open_source("hf:user/name", split="train") # a dataset on the Hub (or in the HF cache)
    src = open_source("imagefolder:data/")           # a local imagefolder, through `datasets`
    src = open_source("saved/")                      # a dataset written by `Dataset.save_to_disk`
    len(src), src.name(i), src.get(i)                # get: a path or encoded bytes, for `load_image`
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attention.errors import InputError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tif", ".tiff")
ACCEPTED = "a folder of images, a glob such as 'photos/**/*.jpg', 'hf:org/name' (a Hub dataset), 'imagefolder:DIR'"


@dataclass(frozen=True)
class FileSource:
    """Image files, in sorted order; names relative to `root`."""

    paths: tuple[str, ...]
    root: str

    def __len__(self) -> int:
        return len(self.paths)

    def name(self, i: int) -> str:
        return os.path.relpath(self.paths[i], self.root)

    def get(self, i: int) -> str:
        return self.paths[i]

    @property
    def spec(self) -> dict:
        return {"kind": "files", "root": self.root, "items": len(self.paths)}


@dataclass(frozen=True)
class HFSource:
    """One split of a `datasets.Dataset`, its image column read undecoded ({"bytes", "path"}), so
    our decoder (`load_image`: size guard, EXIF, clear errors) decodes it in the loader's workers."""

    dataset: Any  # datasets.Dataset (picklable: memory-mapped Arrow files)
    column: str
    label: str

    def __len__(self) -> int:
        return len(self.dataset)

    def name(self, i: int) -> str:
        v = self.dataset[i][self.column]
        path = v.get("path") if isinstance(v, dict) else None
        return os.path.basename(path) if path else f"{self.label}[{i}]"

    def get(self, i: int):
        v = self.dataset[i][self.column]
        if isinstance(v, dict):
            if v.get("bytes"):
                return bytes(v["bytes"])
            if v.get("path"):
                return v["path"]
        if isinstance(v, (str, bytes)):
            return v
        raise InputError(f"Row {i} of {self.label} has no image in column {self.column!r} ({type(v).__name__}).")

    @property
    def spec(self) -> dict:
        return {"kind": "datasets", "label": self.label, "column": self.column, "items": len(self.dataset)}


Source = FileSource | HFSource


def open_source(source: str, *, split: str = "train", image_column: str | None = None) -> Source:
    """The ordered items of `source` (see the module's docstring). Raises InputError naming what is
    accepted when the source does not exist, holds no images, or is a dataset without an image column."""
    text = str(source).strip()
    if text.startswith("hf:"):
        return _hf(lambda ds: ds.load_dataset(text[3:], split=split), f"{text}:{split}", image_column)
    if text.startswith("imagefolder:"):
        folder = text[len("imagefolder:") :]
        if not Path(folder).is_dir():
            raise InputError(f"No such folder {folder!r}; accepted: {ACCEPTED}.")
        return _hf(lambda ds: ds.load_dataset("imagefolder", data_dir=folder, split=split), text, image_column)
    path = Path(text)
    if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()):

        def from_disk(ds):
            d = ds.load_from_disk(text)
            return d[split] if isinstance(d, ds.DatasetDict) else d

        return _hf(from_disk, text, image_column)
    if path.is_dir():
        files = [p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES]
        root = str(path)
    elif path.is_file():
        files, root = [path], str(path.parent)
    elif glob.has_magic(text):
        files = [Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file()]
        root = str(Path(text.split("*")[0].split("?")[0].split("[")[0]).parent) if files else "."
    else:
        raise InputError(f"Source {text!r} is not a file, folder or glob that exists; accepted: {ACCEPTED}.")
    if not files:
        raise InputError(f"Source {text!r} holds no image files ({', '.join(IMAGE_SUFFIXES)}); accepted: {ACCEPTED}.")
    return FileSource(tuple(sorted(str(p) for p in files)), root)


def _hf(load, label: str, column: str | None) -> HFSource:
    try:
        import datasets
    except ImportError:
        raise InputError("Reading a Hugging Face dataset needs the `datasets` package: pip install datasets.") from None
    try:
        ds = load(datasets)
    except Exception as e:  # not found, offline, bad config: one readable error whatever datasets raises
        raise InputError(f"Cannot load the dataset {label!r}: {type(e).__name__}: {e}") from None
    images = [k for k, f in ds.features.items() if isinstance(f, datasets.Image)]
    col = column or (images[0] if images else None)
    if col is None or col not in ds.features:
        raise InputError(
            f"Dataset {label!r} has no image column {column or ''!r}; its columns: {', '.join(ds.features)}; "
            "accepted: --image-column NAME of an Image column."
        )
    if isinstance(ds.features[col], datasets.Image):
        ds = ds.cast_column(col, datasets.Image(decode=False))
    return HFSource(ds.select_columns([col]), col, label)
