"""Ready-made inputs for the calculator, each showing one idea about attention."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attention.calculator.settings import Settings


@dataclass(frozen=True)
class Preset:
    """Inputs for `attend` (mode "direct": Q, K, V) or `attend_from_x` (mode "x": X, W_q, W_k, W_v, W_o).

    matrices: name -> float64 array; settings: heads, scale, mask, dropout and seed.
    """

    name: str
    description: str
    mode: str
    matrices: dict[str, np.ndarray]
    settings: Settings = field(default_factory=Settings)


def _binary_lookup() -> Preset:
    q = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [1, 1, 1]], dtype=float)
    k = np.eye(4, 3)  # rows e1, e2, e3 and a zero key: an "identity" with one key more than d
    v = 4.5 * np.arange(12, dtype=float).reshape(4, 3)
    return Preset(
        "Binary queries, identity keys",
        "5 binary queries (d = 3) against 4 keys: K = eye(4, 3), the 3 x 3 identity plus a zero 4th key "
        "that scores 0 with every query. V = 4.5 x arange(12) reshaped to 4 x 3 (row j = 4.5 x [3j, 3j+1, 3j+2]). "
        "A query with a single 1 matches one key: that key gets the most weight, but with scale "
        "1/sqrt(3) softmax stays soft; set the scale to none (or custom 10) to see it sharpen toward a lookup.",
        "direct",
        {"Q": q, "K": k, "V": v},
    )


def _bag_of_words() -> Preset:
    n = 5
    return Preset(
        "Causal bag of words (running mean)",
        "Q = 0 makes every score 0; the causal mask then hides the future, so query i spreads its weight "
        "evenly over keys 1..i: weights row i = 1/i on the first i keys, and output row i is the mean of "
        "V rows 1..i, a running average of the 'words' so far.",
        "direct",
        {
            "Q": np.zeros((n, 2)),
            "K": np.arange(2 * n, dtype=float).reshape(n, 2) % 3,
            "V": np.array([[6, 0], [0, 6], [3, 3], [9, 0], [0, 3]], dtype=float),
        },
        Settings(mask_mode="causal"),
    )


def _random_x(seed: int = 0) -> Preset:
    rng = np.random.default_rng(seed)
    n, d_model = 6, 4
    x = np.round(rng.normal(size=(n, d_model)), 2)
    w = {nm: np.round(rng.normal(0.0, 1 / np.sqrt(d_model), (d_model, d_model)), 2) for nm in ("W_q", "W_k", "W_v")}
    return Preset(
        "Random X with learned-style projections",
        f"6 tokens X (6 x 4, standard normal, seed {seed}) projected by W_q, W_k, W_v drawn like freshly "
        "initialised layers (normal with std 1/sqrt(d_model) = 0.5), rounded to 2 decimals. Q = X W_q, "
        "K = X W_k, V = X W_v; one head, no output projection. Verified against torch.nn.MultiheadAttention.",
        "x",
        {"X": x, **w},
    )


def _two_heads(seed: int = 1) -> Preset:
    rng = np.random.default_rng(seed)
    n, d_model = 4, 4
    x = np.round(rng.normal(size=(n, d_model)), 1)
    w = {
        nm: np.round(rng.normal(0.0, 1 / np.sqrt(d_model), (d_model, d_model)), 1)
        for nm in ("W_q", "W_k", "W_v", "W_o")
    }
    return Preset(
        "Two heads with an output projection",
        f"X (4 x 4) and W_q, W_k, W_v, W_o (4 x 4), seeded (seed {seed}), rounded to 1 decimal. Two heads: "
        "head 1 uses columns 1-2 of Q, K and V, head 2 columns 3-4; each attends on its own, the two outputs "
        "are put side by side (4 x 4) and multiplied by W_o. Verified against torch.nn.MultiheadAttention.",
        "x",
        {"X": x, **w},
        Settings(heads=2),
    )


PRESETS: dict[str, Preset] = {p.name: p for p in (_binary_lookup(), _bag_of_words(), _random_x(), _two_heads())}
