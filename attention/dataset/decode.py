"""The decoding stage of an extraction run: DataLoader workers read, decode and preprocess items
(one torch thread each; the pixels travel as pickled numpy arrays, not torch's shared-memory tensors,
whose per-tensor file descriptor cost more than the decoding), and how many workers to start."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from attention.dataset.sources import Source
from attention.errors import AttentionError
from attention.vit.preprocess import Preprocess


@dataclass(frozen=True)
class Item:
    """One decoded item: x float32 (C, H, W) and its grid, or the reason it could not be read."""

    id: int
    name: str
    x: np.ndarray | None = None  # numpy: pickled through the worker's pipe (see the module's docstring)
    grid: tuple[int, int] | None = None
    size: tuple[int, int] | None = None  # (W, H) px as the model sees it
    error: str | None = None


class Decoded(Dataset):
    """`source`'s items `ids`, each decoded and preprocessed (in a DataLoader worker); a bad item
    becomes an Item with its reason, never an exception."""

    def __init__(self, source: Source, prep: Preprocess, ids: list[int]):
        self.source, self.prep, self.ids = source, prep, ids

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, j: int) -> Item:
        i = self.ids[j]
        name = f"item {i}"
        try:
            name = self.source.name(i)
            p = self.prep(self.source.get(i))
            return Item(i, name, p.x.numpy(), p.grid, p.shown.size)
        except AttentionError as e:
            reason = str(e)
        except Exception as e:  # anything a decoder or a dataset row can raise: recorded, never fatal
            reason = f"{type(e).__name__}: {e}"
        return Item(i, name, error=reason)


def one_by_one(batch: Item) -> Item:
    """The DataLoader's collate: items pass one by one (batches are made by grid, later)."""
    return batch


def auto_workers(device: torch.device | str, cpus: int | None = None) -> int:
    """DataLoader workers when none are asked, from the cores this process has (`os.cpu_count()`
    shared by torchrun's local processes): on a GPU decoding is the bottleneck, cores - 1 (at most 8);
    on the CPU the forward takes every core and decoding is a few percent of it: one worker per 8
    cores, none below 8 (a worker decoding during the forward stalls one of its threads, and with it
    the others at each barrier; decoding inline between batches costs the same CPU and no copy)."""
    cpus = cpus or max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
    if torch.device(device).type != "cpu":
        return max(1, min(8, cpus - 1))
    return min(8, cpus // 8)
