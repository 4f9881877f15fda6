"""What a score reads of a model: its probabilities for a batch of (perturbed) inputs, and the answer explained.

    sc = scorer(load_vit("mnist_vit"))                       # a classifier: softmax over its classes
    sc = scorer(load_vit("digit_clip"), ["a handwritten three", "a handwritten seven"])   # CLIP: over prompts
    probs = sc.predict(x)                                    # (B, C, H, W) normalised -> (B, K)
    t = sc.target_index("3")                                 # a class index or name, a prompt; None: the top

A classifier (a head read from its class token, `relevance.labels.check_classifier`) is scored by the
softmax of its logits; a CLIP-like model (a text tower: `text.tower.text_model_of`) by the softmax over the
prompts of its scaled cosine logits (SigLIP: each prompt's sigmoid, bias included), so CLIP needs two prompts
or more (the softmax of one is 1 whatever the image).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attention.errors import InputError, NoClassifierError
from attention.vit.backbone import describe
from attention.vit.engine.capture import BlockTokens, recording


@dataclass(frozen=True)
class Scorer:
    """A model as the protocols read it: `image_model` (what the engine and `prepare` read), K answers."""

    image_model: torch.nn.Module
    predict: Callable[[torch.Tensor], torch.Tensor]  # (B, C, H, W) normalised -> float32 (B, K) probabilities
    labels: tuple[str, ...]  # K: class names or prompts
    kind: str  # "classifier", "clip", "siglip" or "embedding"
    prompts: tuple[str, ...] = ()
    bind: Callable[[torch.Tensor], Scorer] | None = None  # "embedding": the scorer for one whole input x

    @property
    def patch(self) -> int:
        return describe(self.image_model).patch_size

    @property
    def mean_std(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        bb = describe(self.image_model)
        return tuple(bb.mean), tuple(bb.std)

    def target_index(self, target: int | str | None, probs: torch.Tensor) -> int:
        """The answer explained: an index or a name (a class; a prompt, or its index), None = the top of
        `probs` (K,), the model's own answer on the whole image. InputError naming what is accepted."""
        if target is None or (isinstance(target, str) and not target.strip()):
            return int(probs.argmax())
        if self.kind == "classifier":
            from attention.vit.relevance.labels import class_index

            return class_index(target, self.labels)
        if isinstance(target, str) and target.strip() in self.labels:
            return self.labels.index(target.strip())
        from attention.errors import as_whole

        i = as_whole(target)
        if i is None or not 0 <= i < len(self.labels):
            raise InputError(
                f"Target {target!r} is not one of the prompts; accepted: a prompt, its index 0 to "
                f"{len(self.labels) - 1}, or empty for the best match."
            )
        return i


def scorer(model: torch.nn.Module, prompts: str | list[str] | None = None, *, embedding: bool = False) -> Scorer:
    """The Scorer of `model`: a classifier (prompts None), or a CLIP-like model with `prompts` (a list, or
    comma-separated; at least 2 for CLIP). NoClassifierError for a backbone without a head or text tower,
    unless `embedding`: then any model (a backbone, a CLIP without prompts) is scored by the cosine of its
    embedding of the perturbed input with its embedding of the whole one (`pooling.embeddings`: CLS, else its
    own pool): not a paper's protocol, the one score every backbone has."""
    from attention.vit.relevance.labels import check_classifier, class_names
    from attention.vit.text.tower import has_text_tower

    if embedding and not prompts and (has_text_tower(model) or not describe(model).classifier):
        return _embedding_scorer(model)
    if has_text_tower(model):
        return _text_scorer(model, prompts)
    if prompts:
        raise InputError(f"{getattr(model, 'alias', type(model).__name__)} has no text tower; prompts need CLIP.")
    check_classifier(model)
    bb = describe(model)

    def predict(x: torch.Tensor) -> torch.Tensor:
        p = next(model.parameters())
        with torch.inference_mode():
            return torch.softmax(bb.run(x.to(p.device, p.dtype), True).float(), -1).cpu()

    return Scorer(model, predict, class_names(model), "classifier")


def _text_scorer(model: torch.nn.Module, prompts) -> Scorer:
    from attention.vit.text.compute import encode_prompts
    from attention.vit.text.dense import logits_of, scale_bias
    from attention.vit.text.prompts import check_prompts
    from attention.vit.text.tower import ready, text_model_of

    if not prompts:
        raise NoClassifierError(
            "A CLIP-like model is scored against prompts: give two or more (the answer is the best match)."
        )
    clip = text_model_of(model)
    tower = ready(clip)
    items = tuple(check_prompts(prompts, clip))
    scale, bias = scale_bias(clip)  # SigLIP has a bias, CLIP none
    siglip = bias is not None
    if not siglip and len(items) < 2:
        raise InputError("CLIP's score is a softmax over the prompts: give two or more (one is always 100%).")
    text = encode_prompts(clip, list(items))

    def predict(x: torch.Tensor) -> torch.Tensor:
        p = next(tower.trunk.parameters())
        with torch.inference_mode():
            emb = tower.embed(tower.trunk.forward_features(x.to(p.device, p.dtype)))
            z = logits_of(emb, text.to(emb.device), scale.to(emb.device), None if bias is None else bias.to(emb.device))
            return (torch.sigmoid(z) if siglip else torch.softmax(z, -1)).cpu()

    return Scorer(tower.trunk, predict, items, "siglip" if siglip else "clip", items)


def _embedding_scorer(model: torch.nn.Module) -> Scorer:
    from attention.vit.engine.pooling import embedding_kind, embeddings

    bb = describe(model)
    label = f"similarity of the embedding ({embedding_kind(model)}) to the whole image's"

    def embed(x: torch.Tensor) -> torch.Tensor:
        rec = BlockTokens(bb.depth - 1)  # the engine's hook: this call's own pass only (thread-safe)
        p = next(model.parameters())
        with torch.inference_mode(), recording(model, rec):
            bb.run(x.to(p.device, p.dtype), False)
        return F.normalize(torch.from_numpy(embeddings(model, rec.tokens)[0]).double(), dim=-1)

    def bind(x: torch.Tensor) -> Scorer:
        ref = embed(x)[0]
        return Scorer(model, lambda xs: (embed(xs) @ ref)[:, None].float(), (label,), "embedding")

    return Scorer(model, lambda xs: torch.ones(len(xs), 1), (label,), "embedding", bind=bind)
