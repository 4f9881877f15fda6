"""What drawing reads of a forward pass: a `MapsSource` hands the maps of any query and layer, their
rollout and the block outputs' feature maps, already computed or memoised wherever it lives (the server's
`serve.pass_memo.Pass` is one). Drawing never holds a server's store: it takes this, or `AttentionMaps`.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from attention.vit.engine.extract import AttentionMaps
from attention.vit.engine.query import Query


class MapsSource(Protocol):
    """One image's forward pass through one model, seen from any query and layer."""

    model: str  # the model's name, as a visitor typed it or the registry's alias
    device: str  # where it ran ("cpu", "cuda:0")

    @property
    def num_layers(self) -> int: ...

    def at(self, query: Query | None = None, layer: int = -1) -> AttentionMaps:
        """The maps of `query` (None: the model's default) at `layer`; InputError off the grid or depth."""
        ...

    def rollout(self, query: Query | None = None, layer: int = -1, **options) -> np.ndarray:
        """float32 (gh, gw): attention rollout of `query` through layers 0..layer (`flow.rollout`'s options)."""
        ...

    def feature_maps(
        self, query: Query | None = None, layer: int = -1, background: float | None = None, pca_style: str = "minmax"
    ) -> dict[str, np.ndarray]:
        """float32 pca (gh, gw, 3), similarity to `query` (gh, gw), norms (gh, gw) of layer `layer`'s tokens."""
        ...
