"""What `evaluate` scores: a fixed, ordered list of items (an image, and where the data has them a mask, a
target and prompts), read from the sources `extract` reads, the shards `extract` wrote, or planted digits.

    items = open_items("photos/", masks="photos_masks/")   # a mask per image: the same relative name, .png
    items = open_items("hf:org/name", split="validation", mask_column="mask", label_column="label")
    items = open_items("extract_out/")                      # the source an `extract` run read (its run.json)
    items = open_items("planted:1000", cells=(1, 1))        # held-out digits in known cells (attention.planted)
    it = items[i]                                           # Item(image, mask, target, prompts, name)

A mask is any image whose nonzero pixels are the object (a binary 0/255 picture; VOC's class PNGs: 255, the
void label, left out, every object class in). The order is the source's (sorted paths, a dataset's rows),
so item i is the same on every rank and in every run (shards and resumption rely on it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attention.errors import InputError

PLANTED = "planted:"


@dataclass(frozen=True)
class Item:
    """One item: image (a path, bytes or a uint8 array), mask bool (H, W) or None, target (a class index or
    name, a prompt; None: the model's top answer), prompts (CLIP: this item's, else None), name, others bool
    (H, W) or None (the other objects' pixels, where known: a planted canvas's other digits)."""

    image: Any
    mask: np.ndarray | None
    target: int | str | None
    prompts: tuple[str, ...] | None
    name: str
    others: np.ndarray | None = None


def read_mask(value) -> np.ndarray:
    """bool (H, W): nonzero of a binary mask picture (0 and 255, or 0 and 1), nonzero and not 255 (VOC's void
    label) of a picture of class labels (a path, bytes, a datasets Image
    dict, a PIL image or an array), its values as stored (a palette PNG's indices, as VOC's); ImageError for
    what cannot be read."""
    import io

    from PIL import Image

    from attention.errors import ImageError

    if isinstance(value, dict):
        value = value.get("bytes") or value.get("path")
    if isinstance(value, np.ndarray):
        a = value
    else:
        try:
            img = (
                value
                if isinstance(value, Image.Image)
                else Image.open(io.BytesIO(value) if isinstance(value, bytes) else value)
            )
            a = np.asarray(img if img.mode in ("1", "L", "P", "I", "RGB", "RGBA") else img.convert("L"))
        except (OSError, ValueError, Image.DecompressionBombError) as e:
            raise ImageError(f"Cannot read the mask: {type(e).__name__}: {e}") from None
    if a.ndim == 3:
        a = a[..., :3].max(-1)
    if a.dtype == bool:
        return a
    values = np.unique(a)
    if len(values) <= 2 or values[-1] != 255:  # a binary mask (0 and 1, or 0 and 255): nonzero
        return a != 0
    return (a != 0) & (a != 255)  # class labels with VOC's void label 255


class Items:
    """The items of one source, as `open_items` reads it: `len`, `[i]`, `spec` (for run.json)."""

    def __init__(self, n: int, get, spec: dict):
        self._n, self._get, self.spec = n, get, spec

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> Item:
        return self._get(i)


def _planted(text: str, cells: tuple[int, int], digits: int, captions: bool) -> Items:
    from attention.planted import planted_batch

    n = text[len(PLANTED) :]
    if not n.isdigit() or not 1 <= int(n) <= 100_000:
        raise InputError(f"{text!r}: accepted planted:N with N from 1 to 100000 canvases.")
    batch = planted_batch(int(n), n_digits=digits, cells=cells, seed=0)

    def get(i: int) -> Item:
        p = batch[i]
        others = p.masks[1:].any(0) if len(p.masks) > 1 else None
        if captions:
            from attention.vit.text.digit_clip import caption

            prompts = tuple(caption(int(c)) for c in p.classes)
            return Item(p.image, p.masks[0], prompts[0], prompts, f"planted[{i}]", others)
        return Item(p.image, p.masks[0], int(p.classes[0]), None, f"planted[{i}]", others)

    spec = {"kind": "planted", "items": int(n), "cells": list(cells), "digits": digits, "captions": captions}
    return Items(int(n), get, spec)


def open_items(
    data: str,
    *,
    split: str = "train",
    image_column: str | None = None,
    mask_column: str | None = None,
    label_column: str | None = None,
    masks: str | None = None,
    cells: tuple[int, int] = (1, 1),
    digits: int = 1,
    captions: bool = False,
) -> Items:
    """The items of `data` (see the module's docstring). masks: a folder of mask pictures for a folder of
    images (each image's relative path with the suffix .png). cells, digits, captions: of planted canvases
    (captions: each canvas's prompts are its digits' captions, the first digit's is the target).
    InputError naming what is accepted."""
    from attention.dataset.sources import FileSource, open_source

    text = str(data).strip()
    if text.startswith(PLANTED):
        return _planted(text, tuple(cells), digits, captions)
    run = Path(text) / "run.json"
    if run.is_file():  # an `extract` output: the source it read
        src = json.loads(run.read_text()).get("source", {})
        if src.get("kind") == "files":
            text = src["root"]
        elif src.get("kind") == "datasets":
            label = src["label"]
            text, split = label.rsplit(":", 1) if label.startswith("hf:") else (label, split)
            image_column = image_column or src.get("column")
        else:
            raise InputError(f"{run} names no source evaluate can read again ({src}).")
    source = open_source(text, split=split, image_column=image_column)
    if isinstance(source, FileSource):
        if mask_column or label_column:
            raise InputError("--mask-column and --label-column are for datasets; a folder's masks: --masks DIR.")

        def get(i: int) -> Item:
            mask = None
            if masks is not None:
                path = Path(masks) / Path(source.name(i)).with_suffix(".png")
                if not path.is_file():
                    raise InputError(f"No mask {path} for {source.name(i)}.")
                mask = read_mask(str(path))
            return Item(source.get(i), mask, None, None, source.name(i))

        return Items(len(source), get, {**source.spec, "masks": masks})
    if masks is not None:
        raise InputError("--masks DIR is for a folder of images; a dataset's masks: --mask-column NAME.")
    extra = _columns(text, split, mask_column, label_column)

    def get_hf(i: int) -> Item:
        mask = None if mask_column is None else read_mask(extra[i][mask_column])
        target = None if label_column is None else extra[i][label_column]
        return Item(source.get(i), mask, target, None, source.name(i))

    return Items(len(source), get_hf, {**source.spec, "mask_column": mask_column, "label_column": label_column})


def _columns(text: str, split: str, mask_column: str | None, label_column: str | None):
    """The dataset's mask and label columns (masks undecoded), or None when neither is asked."""
    cols = [c for c in (mask_column, label_column) if c]
    if not cols:
        return None
    import datasets

    try:
        if text.startswith("hf:"):
            ds = datasets.load_dataset(text[3:], split=split)
        elif text.startswith("imagefolder:"):
            ds = datasets.load_dataset("imagefolder", data_dir=text[len("imagefolder:") :], split=split)
        else:
            d = datasets.load_from_disk(text)
            ds = d[split] if isinstance(d, datasets.DatasetDict) else d
    except Exception as e:
        raise InputError(f"Cannot load the dataset {text!r}: {type(e).__name__}: {e}") from None
    missing = [c for c in cols if c not in ds.features]
    if missing:
        raise InputError(f"Dataset {text!r} has no column {missing[0]!r}; its columns: {', '.join(ds.features)}.")
    if mask_column and isinstance(ds.features[mask_column], datasets.Image):
        ds = ds.cast_column(mask_column, datasets.Image(decode=False))
    return ds.select_columns(cols)
