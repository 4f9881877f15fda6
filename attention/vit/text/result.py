"""One text relevance answer: each computed rule's maps, the prompts' scores as the model gives them, and the
segmentation that labels a patch only where one prompt's map is clearly highest ("none" elsewhere).

    tr.maps("clearclip")        # (P, gh, gw)
    tr.segmentation("clearclip")  # (gh, gw) int: a prompt's index, or NONE (-1) for background / unclear
    tr.ranking()                # [(prompt, logit, score)]: CLIP the cosine, SigLIP the sigmoid; best first
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from attention.errors import InputError
from attention.shows import Shows
from attention.vit.text.openvocab import OPEN_RULES

GRADIENT_RULES = ("chefer", "legrad")
RULES = (*GRADIENT_RULES, "similarity", *OPEN_RULES)
NONE = -1  # the segmentation's label of a patch no prompt clearly holds
FOREGROUND = 0.5  # a patch is labelled only where its best map value is in the top half of all maps' range ...
MARGIN = 0.1  # ... and above the second best by this share of that range (one prompt: the first rule alone)


@dataclass
class TextRelevance(Shows):
    """Text relevance of one image for P prompts over a (gh, gw) grid, for the rules in `maps`."""

    prompts: tuple[str, ...]
    logits: np.ndarray  # float32 (P,): the model's image-text logit per prompt (scale * cosine (+ bias))
    kind: str  # "clip" (scaled cosine) or "siglip" (sigmoid of the logit, bias included)
    scale: float  # the model's logit scale: CLIP's cosine is logit / scale
    maps_by_rule: dict[str, np.ndarray]  # rule -> float32 (P, gh*gw)
    grid: tuple[int, int]
    image: Image.Image  # the preprocessed RGB image the grid aligns to
    patch_size: int
    legrad_layers: int
    options: dict = field(default_factory=dict)  # rule -> the options it ran with (open-vocabulary rules)
    seconds: float = 0.0

    @property
    def rules(self) -> tuple[str, ...]:
        """The rules computed, in RULES order."""
        return tuple(r for r in RULES if r in self.maps_by_rule)

    @property
    def scores(self) -> np.ndarray:
        """float32 (P,): each prompt's own score, comparable across prompts and images and never a share of
        the prompts: CLIP the cosine of image and prompt (logit / scale), SigLIP the sigmoid of its logit."""
        z = self.logits.astype(np.float64)
        if self.kind == "siglip":
            return (1 / (1 + np.exp(-z))).astype(np.float32)
        return (z / self.scale).astype(np.float32)

    @property
    def score_name(self) -> str:
        return "sigmoid of the logit (SigLIP)" if self.kind == "siglip" else "cosine of image and prompt (CLIP)"

    @property
    def nbytes(self) -> int:
        """Bytes held (arrays and the shown image), for a server's bounded store."""
        arrays = (self.logits, *self.maps_by_rule.values())
        return sum(a.nbytes for a in arrays) + self.image.width * self.image.height * 3

    def maps(self, rule: str) -> np.ndarray:
        """float32 (P, gh, gw): each prompt's map by `rule` (one of `rules`)."""
        if rule not in self.maps_by_rule:
            raise InputError(f"Rule {rule!r} was not computed here; accepted: {', '.join(self.rules)}.")
        return self.maps_by_rule[rule].reshape(len(self.prompts), *self.grid)

    def segmentation(self, rule: str) -> np.ndarray:
        """int64 (gh, gw): for each patch, the index of the prompt whose `rule` map is clearly highest there, or
        NONE: where the best value is in the lower half of the maps' range (background), or within MARGIN of
        that range of the second best (no clear answer)."""
        m = self.maps(rule).astype(np.float64)
        lo, hi = float(m.min()), float(m.max())
        spread = max(hi - lo, 1e-12)
        order = np.sort(m, 0)
        top = order[-1]
        second = order[-2] if len(m) > 1 else np.full_like(top, -np.inf)
        clear = (top - lo >= FOREGROUND * spread) & (top - second >= MARGIN * spread)
        return np.where(clear, m.argmax(0), NONE)

    def ranking(self) -> list[tuple[str, float, float]]:
        """(prompt, logit, score) for every prompt, best match first."""
        s = self.scores
        order = np.argsort(-self.logits, kind="stable")
        return [(self.prompts[i], float(self.logits[i]), float(s[i])) for i in order]

    def summary(self) -> dict:
        """JSON-ready: the ranking, the kind of score, the grid, the rules computed and their options."""
        return {
            "ranking": [{"prompt": t, "logit": round(z, 6), "score": round(s, 6)} for t, z, s in self.ranking()],
            "score": self.score_name,
            "grid": list(self.grid),
            "rules": list(self.rules),
            "options": self.options,
            "legrad_layers": self.legrad_layers,
        }
