"""Models with a text tower, loaded for `load_vit`: open_clip models from the Hugging Face Hub
(`open_clip:hf-hub:org/repo`: its open_clip_config.json and open_clip weights, its tokenizer) and the
shipped digit_clip. `load_vit` gets the image tower (a timm ViT the engine reads), the whole model
attached as `text_model` (`tower.ready`).

    trunk = load_open_clip("open_clip:hf-hub:timm/ViT-B-16-SigLIP2")   # CPU, fp32
"""

from __future__ import annotations

import torch

from attention.errors import ModelLoadError

PREFIX = "open_clip:"
WEIGHT_FILES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")


def is_open_clip(name: str) -> bool:
    """Whether `name` names an open_clip model (`open_clip:hf-hub:org/repo`)."""
    return (name or "").strip().startswith(PREFIX)


def repo_of(name: str) -> str:
    """The Hub repo of `open_clip:hf-hub:org/repo`; ModelLoadError for any other form, saying what is accepted."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    rest = name.strip()[len(PREFIX) :]
    if rest.startswith("hf-hub:"):
        try:
            validate_repo_id(rest[len("hf-hub:") :])
            return rest[len("hf-hub:") :]
        except HFValidationError:
            pass
    raise ModelLoadError(
        f"Model id {name[:120]!r} is not accepted; accepted: 'open_clip:hf-hub:org/repo', a Hugging Face repo "
        "holding open_clip_config.json and open_clip weights, e.g. 'open_clip:hf-hub:timm/ViT-B-16-SigLIP2'."
    )


def is_cached(name: str) -> bool:
    """Whether the config and weights of open_clip model `name` are in the local Hugging Face cache."""
    from huggingface_hub import try_to_load_from_cache

    repo = repo_of(name)
    if not isinstance(try_to_load_from_cache(repo, "open_clip_config.json"), str):
        return False
    return any(isinstance(try_to_load_from_cache(repo, f), str) for f in WEIGHT_FILES)


def load_open_clip(name: str) -> torch.nn.Module:
    """The image tower (timm ViT, CPU, fp32) of open_clip model `name` with its weights, the model and its
    tokenizer attached (`text_model`, `text_model.tokenizer`). ModelLoadError when the files cannot be had
    (never random weights: open_clip itself would go on without them); UnsupportedModelError for an image
    tower the engine does not read yet."""
    import open_clip

    from attention.vit.models import hub_errors, weights
    from attention.vit.text.tower import ready

    repo = repo_of(name)
    if not is_cached(name) and not weights.hub_reachable():
        from huggingface_hub import constants

        why = "HF_HUB_OFFLINE=1 is set" if constants.HF_HUB_OFFLINE else "the Hugging Face Hub cannot be reached"
        raise hub_errors.offline(name, repo, why, "open_clip_config.json and the open_clip weights")
    try:
        from open_clip.pretrained import download_pretrained_from_hf

        download_pretrained_from_hf(repo)  # the weights first: open_clip would build a random model without them
        clip = open_clip.create_model(f"hf-hub:{repo}")
        tokenizer = open_clip.get_tokenizer(f"hf-hub:{repo}")
    except Exception as e:  # hub, network, file or config errors: each said as what it is
        raise hub_errors.explain(e, name, repo) from e
    clip.__dict__["tokenizer"] = tokenizer
    clip.eval().requires_grad_(False)
    return weights.check_vit(ready(clip).trunk, name)


def load_shipped(alias: str) -> torch.nn.Module:
    """The image tower of a shipped text model (digit_clip), the model attached."""
    from attention.vit.models import weights
    from attention.vit.text.digit_clip import load_digit_clip
    from attention.vit.text.tower import ready

    clip = load_digit_clip().requires_grad_(False)
    return weights.check_vit(ready(clip).trunk, alias)
