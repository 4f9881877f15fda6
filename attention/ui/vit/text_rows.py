"""The "Find in image" view's patch rows: a click on the large map shows that patch's row of the last block's
attention under the chosen open-vocabulary rule beside the model's own q-k row (what the rule changed, as
attention); the gradient rules and the raw similarity change no attention, so the panel says so instead.
"""

from __future__ import annotations

import gradio as gr

from attention.ui.common.admit import in_lane, who
from attention.ui.common.components import user_errors
from attention.vit.text.openvocab import OPEN_RULES, check_options
from attention.vit.text.service import get_patch_rows, get_text_relevance
from attention.vit.text.views import RULE_NAMES, enlarged, rows_picture

LABEL = "Click a patch of the map: its row of the last block's attention, the model's own and the rule's"


def patch_rows(map_side: int):
    """The click handler: (the click; by name: image, model, resolution, prompts, rule, residual, std, gamma, beta,
    opacity, colours) -> the rows' picture, its label naming the patch."""

    def rows(evt: gr.SelectData, *, img, mdl, res, prompts, rule, residual, std, gamma, beta, al, cm):
        """That patch's rows under `rule` (an open-vocabulary rule), from the stored answer's grid."""
        if rule not in OPEN_RULES:
            return gr.update(value=None, visible=True, label=f"{RULE_NAMES.get(rule, rule)} changes no attention: "
                             "pick an open-vocabulary rule to see its row beside the model's own")  # fmt: skip
        opts = check_options(residual, std, gamma, beta)
        tr = get_text_relevance(img, mdl, res, prompts, rule, opts, visitor=who())  # the map clicked: its grid
        h, w = enlarged(tr, map_side).shape[:2]
        x, y = (int(v) for v in evt.index)
        gh, gw = tr.grid
        patch = (min(max(y, 0) * gh // h, gh - 1), min(max(x, 0) * gw // w, gw - 1))
        pr = get_patch_rows(img, mdl, res, rule, opts, patch, visitor=who())
        name = RULE_NAMES[rule].split(" (")[0]
        label = f"Patch (row {patch[0]}, col {patch[1]}): its last-block attention row, the model's own, then {name}'s"
        return gr.update(value=rows_picture(pr, alpha=al, cmap=cm, min_side=map_side // 2), visible=True, label=label)

    return in_lane(user_errors(rows))  # in the heavy lane's threads, as the maps
