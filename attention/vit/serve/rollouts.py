"""Attention rollout for visitors: priced before it runs, and computed in the lane its price belongs to.

A rollout needs every head's N x N attention of every layer up to the one shown (rebuilt chunk by chunk
from the pass's kept q and k: `flow.rollout`, O(N) memory), so at high token counts it costs more than the
forward that made the pass (`cost.rollout_gflop`). It is priced before it runs: over the heavy jobs' budget
(ATTENTION_RELEVANCE_MAX_GFLOP_*) it is refused at once (BudgetError naming what fits); over
ATTENTION_ROLLOUT_LIGHT_GFLOP it is computed in the heavy lane (`admission.HEAVY`: the visitor's turn there,
in the lane's niced threads), never in the light handler's worker; a small one is computed where it is asked.
A memoised one costs nothing. Every view that draws a rollout (the tab's maps, /attention_maps, the .npz
download, /export_view) asks `ready` first, then draws from the pass's memo.

    ready(p, v, who())                      # v: a checked `frames.ViewSpec`; then frames.api_sheet(p, v)
"""

from __future__ import annotations

from attention.config import SETTINGS
from attention.crowd.admission import HEAVY, Lane
from attention.crowd.visitors import Visitor
from attention.errors import BudgetError
from attention.vit.draw.frames import ViewSpec
from attention.vit.serve.pass_memo import Pass


def price(p: Pass, v: ViewSpec) -> float:
    """Estimated GFLOP of computing view `v`'s rollout on pass `p` (0 when `v` is another view or it is memoised)."""
    if v.view != "rollout":
        return 0.0
    opts = v.rollout_options or {}
    if p.has_rollout(v.query, v.layer, **opts):
        return 0.0
    return p.rollout_gflop(v.query, v.layer, **opts)


def check(p: Pass, v: ViewSpec) -> float:
    """`price(p, v)` (GFLOP; 0 for another view or a memoised one), BudgetError over the heavy jobs' budget
    before anything runs. For a job that draws the rollout inside its own heavy job (the faithfulness line)."""
    gflop = price(p, v)
    budget = SETTINGS.relevance_budget_gflop(p.device)
    if gflop > budget:
        layer = p.at(v.query, v.layer).layer
        raise BudgetError(
            f"This rollout through layers 0 to {layer} of {p.model} costs about {gflop:,.0f} GFLOP (every head's "
            f"attention over {p.base.qk[0][0].shape[1]:,} tokens, each layer), over this server's budget of "
            f"{budget:,.0f} GFLOP per heavy job on {p.device.split(':')[0]}; accepted: an earlier layer, a lower "
            "resolution, or discard ratio 0 (dropping the lowest share costs more)."
        )
    return gflop


def ready(p: Pass, v: ViewSpec, visitor: Visitor, lane: Lane = HEAVY) -> None:
    """View `v`'s rollout memoised in `p` (nothing for another view): refused over the heavy jobs' budget
    (BudgetError, before anything runs: `check`), computed in `lane` (`lane.call`, in `visitor`'s turn: Busy at
    once over their share) when its price is over ATTENTION_ROLLOUT_LIGHT_GFLOP, else here. A visitor without
    keys (a script, the command line): computed here, whatever its price."""
    gflop = check(p, v)
    if not gflop:
        return
    opts = v.rollout_options or {}
    if gflop <= SETTINGS.rollout_light_gflop or not visitor.keys:
        p.rollout(v.query, v.layer, **opts)
        return

    def job() -> None:
        with lane.turn(visitor):
            p.rollout(v.query, v.layer, **opts)

    lane.call(job)
