"""Why this class? Class relevance for ViT classifiers (Chefer et al.'s rule, vit-explain's grad-rollout)
beside the raw attention of the same pass, and the perturbation test that measures their faithfulness.

compute   `relevance(model, image, target)`: one forward + one backward, O(layers x N x d) memory
labels    which models are classifiers, class names: ImageNet's from timm's label data, digits for mnist_vit
views     the maps drawn as captioned overlays, and an answer's files (picture, .npz, facts)
service   for a server: models by name (allow-list), the compute budget, a shared bounded store of results
(the perturbation test that measures them: `python -m bench.evaluate_relevance`, out of the package)
"""

from attention.errors import NoClassifierError
from attention.vit.relevance.compute import DISCARD_RATIO, Relevance, relevance, relevance_rows
from attention.vit.relevance.labels import check_classifier, class_index, class_names, classifiers, short_name

__all__ = [
    "DISCARD_RATIO",
    "NoClassifierError",
    "Relevance",
    "check_classifier",
    "classifiers",
    "relevance",
    "relevance_rows",
    "class_index",
    "class_names",
    "short_name",
]
