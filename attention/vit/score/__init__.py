"""Which map to trust: faithfulness and localisation scores for every map the explorer draws, for one image
and for a whole dataset.

protocol  the protocols on arrays: removal orders and masks, AUCs, the pointing game, segmentation counts
target    what a score reads of a model: its probabilities (a classifier's classes, CLIP's prompts), the answer
maps      the maps by name (attention, rollout, chefer, grad_rollout, legrad, similarity, random, truth)
compute   `score_maps(scorer(model), image, maps)`: perturbation, deletion, insertion, pointing, mIoU
run       `evaluate(...)`: a dataset's items scored in shards (torchrun splits them, a run resumes), one table
service   for a server's visitors: the heavy lane, the price, a bounded store (`faithfulness`)
"""

from attention.vit.score.compute import PROTOCOLS, Scored, Scores, score_maps
from attention.vit.score.maps import CLASSIFIER, TEXT, accepted
from attention.vit.score.protocol import STEPS, UNITS, VALUES, Segmentation
from attention.vit.score.target import Scorer, scorer

__all__ = [
    "CLASSIFIER",
    "PROTOCOLS",
    "STEPS",
    "TEXT",
    "UNITS",
    "VALUES",
    "Scored",
    "Scorer",
    "Scores",
    "Segmentation",
    "accepted",
    "score_maps",
    "scorer",
]
