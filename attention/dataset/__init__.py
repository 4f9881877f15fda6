"""Attention for a whole dataset: `python -m attention extract SOURCE --out OUT` (and under torchrun).

sources   a folder, a glob, or a Hugging Face `datasets` dataset, as one ordered list of items
run       one run: one forward per batch of one grid, shards split by rank, resumable
decode    the DataLoader workers' decoding and preprocessing, how many workers
writer    the writer thread: a batch's rows, the shards written in order
dist      torchrun: ranks, the process group, sums over ranks
shards    the Parquet shards, their done markers, the index (readable by pandas, pyarrow, datasets)
"""

from attention.dataset.run import Summary, extract
from attention.dataset.shards import schema
from attention.dataset.sources import FileSource, HFSource, open_source

__all__ = ["FileSource", "HFSource", "Summary", "extract", "open_source", "schema"]
