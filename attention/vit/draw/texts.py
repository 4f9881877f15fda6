"""The words and the legend beside a view's pictures: the details line, the query's label, the
query row's scores against its softmax weights (as DINO's tutorial prints them), the colour
legend of each view, and a rollout's caption.

    details(res, model="mnist_vit", device="cpu")    # "`mnist_vit` · patch 4 px · grid 7×7 · ..."
    summary, rows = scores_table(res, head=0)        # markdown, rows of SCORE_HEADERS
    legend_html("inferno", "heads")                  # a colour bar (masks, fig3: tints and head colours)
"""

from __future__ import annotations

import numpy as np

from attention.errors import markdown_text
from attention.render import HEAD_COLORS, colormap
from attention.validate import head_index
from attention.vit.engine.extract import AttentionMaps
from attention.vit.engine.query import kinds
from attention.vit.engine.query import label as query_label_text
from attention.vit.engine.query import token_name as query_token_name
from attention.vit.engine.request import CMAP, DISCARD_RATIO, DISCARD_RULE, FUSION, THRESHOLD, VIEW


def query_label(res: AttentionMaps) -> str:
    """Markdown naming the query token, and the model's tokens a query may name (`query.tokens_of`)."""
    names = [*res.tokens, *(["pool"] if res.pool else [])]
    has = f" This model's tokens: {', '.join(names)}." if names else " This model has no class token: patches only."
    if res.query == "pool":
        return (
            f"**Query: {query_label_text(res.query)}** (its one attention, after the last layer).{has} "
            "Click a patch of the image to make it the query."
        )
    if isinstance(res.query, str):
        return f"**Query: {query_label_text(res.query)}.**{has} Click a patch of the image to make it the query."
    return f"**Query: {query_label_text(res.query)}**, token {res.query_index}, marked by a cyan square.{has}"


def details(res: AttentionMaps, *, model: str, device: str, plain: bool = False) -> str:
    """One markdown line: model, patch, grid, tokens, depth, device, milliseconds. plain: the same facts as plain
    text (the model's name as typed), for a page that escapes what it is given."""
    gh, gw = res.grid
    L, H, N = res.weights.shape
    w, h = res.image.size
    name = model if plain else f"<code>{markdown_text(model)}</code>"
    bg = res.image.info.get("background")  # a transparent picture, flattened by `images.load_image`
    return (
        f"{name} · patch {res.patch_size} px · grid {gh}×{gw} · "
        f"{N} tokens ({res.num_prefix_tokens} prefix) · "
        f"layer {res.layer}/{L - 1} · {H} heads · input {w}×{h} px · {device} · forward {res.seconds * 1000:.0f} ms"
        + (f" · transparent parts shown on {bg} (the picture is {'light' if bg == 'black' else 'dark'})" if bg else "")
    )


def token_name(res: AttentionMaps, j: int) -> str:
    """Readable name of token j of `res` (`query.token_name`): CLS, distillation token, register i, patch (r, c)."""
    return query_token_name(j, res.tokens, res.grid)


SCORE_HEADERS = ["rank", "token", "raw score q·k/√d", "softmax weight"]


def scores_table(res: AttentionMaps, head: int, top: int = 10) -> tuple[str, list[list]]:
    """The query row of one head at the selected layer, as DINO's tutorial prints it: raw scores
    and their softmax weights. Returns (markdown summary, rows of SCORE_HEADERS): the `top` tokens
    by weight in rank order, CLS and registers among them where their weight ranks them (the
    summary gives their share)."""
    H = res.weights.shape[1]
    head = head_index(head, H)
    s, w = res.scores[res.layer, head], res.weights[res.layer, head]
    P = res.num_prefix_tokens
    order = np.argsort(-w, kind="stable")[:top]
    rows = [[r + 1, token_name(res, j), round(float(s[j]), 3), round(float(w[j]), 4)] for r, j in enumerate(order)]
    share = float(w[:P].sum())
    parts = ", ".join(f"{kind} {float(w[js].sum()):.1%}" for kind, js in kinds(res.tokens).items())
    ent = float(-(w * np.log(np.maximum(w, 1e-30))).sum())
    summary = (
        f"Head {head}, layer {res.layer}, query {query_label_text(res.query, short=True)}: "
        f"softmax over all {len(w)} tokens; **{share:.1%} of the weight on the prefix**"
        + (f" ({parts})" if parts else "")
        + "; "
        f"scores span {float(s.min()):.2f} to {float(s.max()):.2f}; entropy {ent:.2f} nats "
        f"(uniform: {np.log(len(w)):.2f})."
    )
    return summary, rows


def legend_html(
    cmap: str = CMAP.default, view: str = VIEW.default, heads: int = 0, threshold: float = THRESHOLD.default
) -> str:
    """A small HTML legend matching `view`: a colour bar for `cmap` (heads, mean, rollout), the
    tint and outline of the masks (masks), or each head's colour (fig3, `heads` of them)."""
    query = '<span style="color:#0aa">✛</span> query patch'
    style = '<div class="attn-legend" style="display:flex;align-items:center;gap:8px;font-size:0.85em">'
    if view == "masks":
        return (
            f'{style}<span style="display:inline-block;width:14px;height:12px;background:#ff4040;'
            f'opacity:.75;border:2px solid #ff4040"></span><span>the patches holding {threshold:.0%} of the '
            "chosen head's attention (outlined); the rest darkened</span>"
            f'<span style="opacity:0.75">· {query}</span></div>'
        )
    if view == "fig3":
        swatches = "".join(
            f'<span style="white-space:nowrap"><span style="display:inline-block;width:12px;height:12px;'
            f'border-radius:2px;background:rgb{HEAD_COLORS[h % len(HEAD_COLORS)]}"></span> head {h}</span>'
            for h in range(heads)
        )
        return (
            f"{style}<span>each head's {threshold:.0%} mask, tinted and outlined:</span>{swatches}"
            f'<span style="opacity:0.75">· {query}</span></div>'
        )
    lut = colormap(cmap)
    stops = ", ".join(
        f"rgb({r},{g},{b}) {i / 10:.0%}" for i, (r, g, b) in enumerate(lut[np.linspace(0, 255, 11).astype(int)])
    )
    return (
        f"{style}<span>low</span>"
        '<span style="flex:0 0 180px;height:12px;border-radius:3px;'
        f'background:linear-gradient(to right, {stops})"></span>'
        "<span>high attention</span>"
        f'<span style="opacity:0.75">· each map is scaled to its own range · {query}</span></div>'
    )


def rollout_caption(
    head_fusion: str = FUSION.default, discard_ratio: float = DISCARD_RATIO.default, discard: str = DISCARD_RULE.default
) -> str:
    """How a rollout was made, for its caption: "max of heads, lowest 90% dropped (whole matrix)"."""
    where = "per row" if discard == "row" else "whole matrix, CLS kept"
    dropped = f", lowest {discard_ratio:.0%} dropped ({where})" if discard_ratio > 0 else ""
    return f"{head_fusion} of heads{dropped}"
