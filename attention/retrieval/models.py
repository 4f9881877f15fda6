"""The two trained retrieval models: an embedding, then one attention lookup over a database.

Both embed the query digit and every database digit with the same network, let
`nn.MultiheadAttention` score the query against the embedded database (K = V = the
embedded database), and retrieve `weights @ database images`: the output is a
weighted average of real database digits, the weights say which ones were picked.

- `LabRetriever` is the lab's model, faithfully: Linear(784, 32), one head.
- `CNNRetriever` is the better one: a small CNN embedding and 4 heads (trained with a
  class-aware loss on fresh random databases, see `attention.retrieval.train`).

Weights ship as `weights/retrieval_<name>.safetensors` with a json config beside them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch import nn

from attention.config import WEIGHTS_DIR
from attention.errors import InputError, ModelLoadError
from attention.mnist import MEAN, STD

MODEL_NAMES = ("lab", "cnn")


class Retriever(nn.Module):
    """Embedding + one `nn.MultiheadAttention` lookup; subclasses define `embed`."""

    def __init__(self, embed_dim: int, num_heads: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads=num_heads, batch_first=True)

    def embed(self, x: torch.Tensor) -> torch.Tensor:  # (B, 784) normalised -> (B, E)
        raise NotImplementedError

    def forward(self, queries: torch.Tensor, database: torch.Tensor) -> torch.Tensor:
        """queries: float (B, 784) and database: float (N, 784), pixels in [0, 1].

        Returns the attention weights (B, N), each row summing to 1 (mean over heads).
        """
        q = self.embed((queries - MEAN) / STD).unsqueeze(1)  # (B, 1, E)
        k = self.embed((database - MEAN) / STD).unsqueeze(0).expand(len(q), -1, -1)  # (B, N, E)
        _, w = self.attn(q, k, k, need_weights=True, average_attn_weights=True)  # (B, 1, N)
        return w[:, 0]


class LabRetriever(Retriever):
    """The lab's model: a Linear(784, embed_dim) embedding shared by query and database."""

    def __init__(self, embed_dim: int = 32, num_heads: int = 1) -> None:
        super().__init__(embed_dim, num_heads)
        self.embedding = nn.Linear(784, embed_dim)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.embedding(x)


class CNNRetriever(Retriever):
    """A small CNN embedding (two conv blocks, 28 -> 7) and several heads."""

    def __init__(self, embed_dim: int = 64, num_heads: int = 4, channels: int = 16) -> None:
        super().__init__(embed_dim, num_heads)
        c = channels
        self.embedding = nn.Sequential(
            nn.Conv2d(1, c, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c, 2 * c, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(2 * c * 7 * 7, embed_dim),
        )

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.embedding(x.view(-1, 1, 28, 28))


def build(config: dict) -> Retriever:
    """A fresh (untrained) model from a config: {"kind": "lab"|"cnn", ...its constructor args}."""
    kind = config.get("kind")
    args = {k: config[k] for k in ("embed_dim", "num_heads", "channels") if k in config}
    if kind == "lab":
        args.pop("channels", None)
        return LabRetriever(**args)
    if kind == "cnn":
        return CNNRetriever(**args)
    raise InputError(f"unknown retrieval model kind {kind!r}: expected one of {MODEL_NAMES}")


def save(model: Retriever, name: str, config: dict, directory: Path = WEIGHTS_DIR) -> Path:
    """Write weights/retrieval_<name>.safetensors and its json config (config must hold "kind")."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"retrieval_{name}.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    path.with_suffix(".json").write_text(json.dumps(config, indent=2) + "\n")
    return path


@lru_cache(maxsize=4)
def _load_cached(name: str, directory: str) -> tuple[Retriever, dict]:
    from safetensors.torch import load_file

    path = Path(directory) / f"retrieval_{name}.safetensors"
    try:
        config = json.loads(path.with_suffix(".json").read_text())
        model = build(config)
        model.load_state_dict(load_file(str(path)))
    except (OSError, ValueError, RuntimeError) as e:
        raise ModelLoadError(
            f"cannot load the retrieval model {name!r} from {path}: {str(e).rstrip('.')}. "
            "Run `python -m attention.retrieval train --replace` to write it."
        ) from e
    return model.eval(), config


def load(name: str, directory: Path = WEIGHTS_DIR) -> tuple[Retriever, dict]:
    """The shipped model `name` ("lab" or "cnn") in eval mode, and its config (cached: do not train it)."""
    if name not in MODEL_NAMES:
        raise InputError(f"unknown retrieval model {name!r}: expected one of {', '.join(MODEL_NAMES)}")
    return _load_cached(name, str(directory))


def as_pixels(images: np.ndarray) -> torch.Tensor:
    """uint8 (n, 28, 28) -> float (n, 784) in [0, 1]."""
    return torch.as_tensor(np.asarray(images), dtype=torch.float32).reshape(len(images), 784) / 255.0


@torch.no_grad()
def attention_weights(model: Retriever, queries: np.ndarray, database: np.ndarray, batch: int = 500) -> np.ndarray:
    """Weights of `model` for uint8 queries (B, 28, 28) over a uint8 database (N, 28, 28): float (B, N)."""
    model.eval()
    db = as_pixels(database)
    q = as_pixels(queries)
    return torch.cat([model(q[i : i + batch], db) for i in range(0, len(q), batch)]).numpy()
