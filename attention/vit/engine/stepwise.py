"""One head's row, step by step, from a kept pass (no new forward): the neuron view for image patches.

For one layer, head and query token i, what the attention kernel computed for that row:

    q_i              (d,)      the query vector as the kernel got it (after q_norm and the rotary embedding)
    k_j, v_j         (m, d), (m, dv)   the keys and values of the prefix tokens and the top-k patches
    q_i * k_j        (d,)      element-wise, for one selected key: which dimensions make its weight high
    q_i . k_j        (m,)      the dot products; x scale (head_dim ** -0.5); + the additive bias (relpos, BEiT)
    softmax(s / T)   (N,)      over all N tokens, temperature T (1 = the model): the row, and its map

    steps = explain_row(p, query=(3, 4), layer=-1, head=0, k=16, temperature=1.0)  # p: a Pass or AttentionMaps
    steps.products      # (d,) q_i * k_sel
    steps.map           # (gh, gw) the row over patches at temperature T (the map on screen at T = 1)
    steps.output        # (dv,) the row restricted to the kept keys (softmax over them) times their values

The pass keeps each layer's q, k and v as the kernel got them (`rows.Rows`), so nothing is recomputed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attention.errors import InputError, as_whole, check_number
from attention.shows import Shows
from attention.validate import head_index, layer_index
from attention.vit.engine.extract import AttentionMaps, query_scores
from attention.vit.engine.query import Query, parse, token_name
from attention.vit.engine.query import to_json as query_json

MAX_K = 64  # top patches a step-by-step keeps (the calculator takes at most 64 rows)
K, TEMPERATURE = 16, 1.0  # the step by step's defaults everywhere (tab, API, export): top patches kept, softmax T
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.05, 20.0


def check_k(k: object) -> int:
    """`k` as a whole number 1..MAX_K, else InputError naming what is accepted."""
    v = as_whole(k)
    if v is None or not 1 <= v <= MAX_K:
        raise InputError(f"k (top patches kept) {k!r} is not accepted; a whole number from 1 to {MAX_K}.")
    return v


def check_temperature(t: object) -> float:
    """`t` as a float in [MIN_TEMPERATURE, MAX_TEMPERATURE], else InputError."""
    return check_number(t, "The temperature", MIN_TEMPERATURE, MAX_TEMPERATURE)


@dataclass(frozen=True)
class RowSteps(Shows):
    """One head's query row, step by step (see the module). m kept keys: the P prefix tokens, then the
    top-k patches by weight (and the selected key when it is none of them); d = head_dim."""

    layer: int
    head: int
    query: Query
    query_index: int  # i, in the pass's sequence of N tokens
    grid: tuple[int, int]
    num_prefix_tokens: int
    names: tuple[str, ...]  # (m,) "cls", "register 0", "patch (r, c)"
    index: np.ndarray  # int64 (m,): each kept key's token index
    q: np.ndarray  # float32 (d,): q_i as the kernel got it
    k: np.ndarray  # float32 (m, d): the kept keys as the kernel got them
    v: np.ndarray  # float32 (m, dv): their values
    selected: int  # position in the kept keys of the selected key
    products: np.ndarray  # float32 (d,): q_i * k_selected, element-wise (sums to dots[selected])
    dots: np.ndarray  # float32 (m,): q_i . k_j
    scale: float  # the kernel's scale
    bias: np.ndarray | None  # float32 (m,): the kernel's additive bias for (i, j), or None (the model has none)
    logits: np.ndarray  # float32 (m,): dots * scale (+ bias): the raw scores of the kept keys
    temperature: float
    scores: np.ndarray  # float32 (N,): the whole row's raw scores (all tokens), as `logits` for the kept ones
    weights: np.ndarray  # float32 (N,): softmax(scores / T) over all N tokens
    restricted: np.ndarray  # float64 (m,): softmax(logits / T) over the kept keys only
    output: np.ndarray  # float64 (dv,): restricted @ v, the head's output row restricted to the kept keys

    @property
    def map(self) -> np.ndarray:
        """float32 (gh, gw): the row's weights over the patches at temperature T (not renormalised)."""
        return self.weights[self.num_prefix_tokens :].reshape(self.grid)

    @property
    def top_share(self) -> float:
        """The largest weight of the row on one patch (its share of the attention), at temperature T."""
        return float(self.map.max())

    @property
    def top_patch(self) -> tuple[int, int]:
        """(row, col) of the patch holding `top_share`."""
        r, c = np.unravel_index(int(np.argmax(self.map)), self.grid)
        return int(r), int(c)

    @property
    def entropy(self) -> float:
        """Entropy of the whole row (all N tokens) at temperature T, in bits: 0 = one token, log2 N = uniform."""
        w = self.weights.astype(np.float64)
        w = w[w > 0]
        return float(-(w * np.log2(w)).sum())

    @property
    def max_entropy(self) -> float:
        """log2 N: the entropy of a uniform row."""
        return math.log2(self.weights.shape[0])

    @property
    def selected_name(self) -> str:
        return self.names[self.selected]

    def to_json(self) -> dict:
        """Every number as JSON (lists of floats), for the API."""

        def f(a):
            return None if a is None else np.asarray(a, np.float64).round(8).tolist()

        return {
            "layer": self.layer,
            "head": self.head,
            "query": query_json(self.query),
            "query_index": self.query_index,
            "grid": list(self.grid),
            "keys": list(self.names),
            "key_index": self.index.tolist(),
            "selected": self.selected,
            "q": f(self.q),
            "k": f(self.k),
            "v": f(self.v),
            "products": f(self.products),
            "dots": f(self.dots),
            "scale": self.scale,
            "bias": f(self.bias),
            "logits": f(self.logits),
            "temperature": self.temperature,
            "weights": f(self.weights),
            "map": f(self.map),
            "top_share": self.top_share,
            "top_patch": list(self.top_patch),
            "entropy_bits": self.entropy,
            "max_entropy_bits": self.max_entropy,
            "restricted_weights": f(self.restricted),
            "restricted_output": f(self.output),
        }


def _maps(p: object) -> AttentionMaps:
    res = getattr(p, "base", p)  # a Pass, or AttentionMaps themselves
    if not isinstance(res, AttentionMaps):
        raise InputError(f"explain_row reads a pass or AttentionMaps, not {type(p).__name__}.")
    if res.qk is None or res.v is None:
        raise InputError(
            "This result kept no q, k and v; extract with keep_qk=True (the app's passes do) to see a row step by step."
        )
    return res


def explain_row(
    p: object,
    query: Query | None = None,
    layer: int = -1,
    head: int = 0,
    k: int = K,
    key: Query | None = None,
    temperature: float = TEMPERATURE,
) -> RowSteps:
    """Head `head`'s row of `query` at `layer`, step by step, from pass `p` (a `passes.Pass` or
    `AttentionMaps` extracted with keep_qk=True): no new forward.

    query: a prefix token ("cls", "reg0", ...) or (row, col); None: the pass's own query.
    k: top patches kept (1..MAX_K, at most the grid), ranked by the model's weight (temperature 1).
    key: the key whose element-wise products are shown (a token or a patch; one outside the kept keys is
    added to them); None: the top patch. temperature: softmax(scores / T), T in [0.05, 20], 1 = the model.
    Raises InputError for a bad layer, head, query, key, k or temperature, and for the pooling head's query
    (its values are not kept: it is not a row of a block)."""
    res = _maps(p)
    q_tok = res.query if query is None else parse(query)
    i = res.index_of(q_tok)
    if i < 0:
        raise InputError("The attention-pooling head's query has no step-by-step view; pick a patch or a prefix token.")
    L, H = len(res.qk), res.qk[0][0].shape[0]
    layer = layer_index(layer, L)
    h = head_index(head, H)
    kk, t = check_k(k), check_temperature(temperature)
    qs, ks = res.qk[layer]
    bias = res.layer_bias[layer]
    scores = query_scores(qs, ks, i, res.scale, bias)[h]  # (N,) as the kernel: scale * (q_i . k_j) + bias
    P, n_patch = res.num_prefix_tokens, res.grid[0] * res.grid[1]
    top = np.argsort(-scores[P:].numpy(), kind="stable")[: min(kk, n_patch)] + P
    index = [*range(P), *top.tolist()]
    sel = int(top[0]) if key is None else res.index_of(parse(key))
    if sel < 0:
        raise InputError("The pooling head's query is not a key; pick a patch or a prefix token.")
    if sel not in index:
        index.append(sel)
    idx = torch.as_tensor(index, dtype=torch.long)
    qi = qs[h, i].float()
    kj, vj = ks[h, idx].float(), res.v[layer][h, idx].float()
    dots = kj @ qi
    b = None
    if bias is not None:
        b = bias[h if bias.shape[0] > 1 else 0, i if bias.shape[1] > 1 else 0, idx].float().numpy()
    logits = scores[idx].numpy()
    weights = torch.softmax(scores / t, -1).numpy()
    lg = logits.astype(np.float64) / t
    e = np.exp(lg - lg.max())
    restricted = e / e.sum()
    return RowSteps(
        layer=layer,
        head=h,
        query=q_tok,
        query_index=i,
        grid=res.grid,
        num_prefix_tokens=P,
        names=tuple(token_name(j, res.tokens, res.grid) for j in index),
        index=np.asarray(index, np.int64),
        q=qi.numpy(),
        k=kj.numpy(),
        v=vj.numpy(),
        selected=index.index(sel),
        products=(qi * kj[index.index(sel)]).numpy(),
        dots=dots.numpy(),
        scale=float(res.scale),
        bias=b,
        logits=logits,
        temperature=t,
        scores=scores.numpy(),
        weights=weights,
        restricted=restricted,
        output=restricted @ vj.numpy().astype(np.float64),
    )


@dataclass(frozen=True)
class CalculatorInputs:
    """What "Open in the calculator" hands the Q/K/V calculator: Q (1, d'), K (m, d'), V (m, dv) float64,
    one row of K and V per kept key (`names`), and the custom scale. With an additive bias, d' = d + 1: Q's
    extra column is 1 and K's is bias_j / scale, so scale' (q . k_j + bias_j / scale) = (scale q . k_j +
    bias_j) / T; where d + 1 columns do not fit the calculator, the bias moves into K along q instead
    (k_j + bias_j / (scale |q|^2) q), `folded` says which."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    scale: float  # scale / T
    names: tuple[str, ...]
    folded: str  # "" (no bias), "column" or "along q"


def calculator_inputs(steps: RowSteps, max_cols: int | None = None) -> CalculatorInputs:
    """`steps` as the calculator's Q, K, V and scale: its output row equals `steps.output` (the head's
    row restricted to the kept keys, at the same temperature). max_cols: the calculator's bound
    (`matrices.MAX_SIZE`)."""
    from attention.calculator.matrices import MAX_SIZE

    cols = MAX_SIZE if max_cols is None else max_cols
    q, k = steps.q.astype(np.float64)[None], steps.k.astype(np.float64)
    how = ""
    if steps.bias is not None:
        extra = steps.bias.astype(np.float64) / steps.scale
        if q.shape[1] + 1 <= cols:
            q, k, how = np.hstack([q, [[1.0]]]), np.hstack([k, extra[:, None]]), "column"
        else:
            qq = float(q[0] @ q[0])
            if qq == 0:
                raise InputError("This query vector is zero: its bias cannot be carried into the calculator.")
            k, how = k + extra[:, None] * q / qq, "along q"
    return CalculatorInputs(
        Q=q, K=k, V=steps.v.astype(np.float64), scale=steps.scale / steps.temperature, names=steps.names, folded=how
    )


FORM_DIGITS = 9  # decimals the calculator's cells get: its output within 1e-6 of the head's restricted row


def calculator_form(steps: RowSteps, max_cols: int | None = None) -> dict:
    """What "Open in the calculator" writes into the calculator's form: `matrices` (Q, K, V as rows of text
    cells, FORM_DIGITS decimals), `settings` (the form's fields: one head, the custom scale, no mask, no
    dropout), `names` (K's and V's rows, one per kept key), `folded` (`calculator_inputs`)."""
    from attention.calculator.matrices import format_cells

    ci = calculator_inputs(steps, max_cols)
    return {
        "matrices": {n: format_cells(a, FORM_DIGITS) for n, a in (("Q", ci.Q), ("K", ci.K), ("V", ci.V))},
        "settings": {"heads": 1, "scale_mode": "custom", "scale": ci.scale, "mask_mode": "none", "mask": ""},
        "names": list(ci.names),
        "folded": ci.folded,
    }
