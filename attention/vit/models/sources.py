"""Where a model's weights come from: a name resolved to a timm name and registry entry (`resolve`),
the Hub repo it is read from, whether its weights are on disk or can be had now, the load from the Hub
(`load_hub`), and the model the app starts with (`startup_model`).

    timm_name, spec = resolve("dino_vits16")            # ("vit_small_patch16_224.dino", ModelSpec(...))
    model = load_hub("vit_small_patch16_224.dino")     # uncached: the model, not yet on a device
    s = startup_model()                                # Startup(model, default_available, notice)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from attention.config import WEIGHTS_DIR
from attention.errors import ModelLoadError
from attention.vit.models import hub_errors, weights
from attention.vit.models.registry import OFFLINE_MODEL, REGISTRY, VIT_MODULES, ModelSpec, default_model


def resolve(name: str) -> tuple[str, ModelSpec | None]:
    """Map an alias, a timm name or `hf-hub:org/repo` to (timm name, registry spec or None).

    Raises ModelLoadError for an empty or unknown name, listing what is accepted.
    """
    name = (name or "").strip()
    if name in REGISTRY:
        spec = REGISTRY[name]
        return spec.timm_name, spec
    for spec in REGISTRY.values():  # a registered timm tag typed in full
        if name == spec.timm_name:
            return name, spec
    if name.startswith("open_clip:"):  # open_clip CLIP/SigLIP with their text tower (`text.load`)
        from attention.vit.text.load import repo_of

        repo_of(name)  # ModelLoadError saying what is accepted
        return name, None
    if name.startswith("hf:"):  # transformers names (`backbone.load`)
        from attention.vit.backbone.load import check_name

        return check_name(name), None
    if name.startswith("hf-hub:") and len(name) > len("hf-hub:"):
        from huggingface_hub.utils import HFValidationError, validate_repo_id

        try:
            validate_repo_id(name[len("hf-hub:") :])
        except HFValidationError:
            raise ModelLoadError(
                f"Model id {name!r} is not a Hugging Face repo id; accepted: 'hf-hub:org/repo' with letters, digits, "
                "'-', '_' and '.' (no '..', no '@revision', no path), e.g. 'hf-hub:timm/vit_small_patch16_224.dino'."
            ) from None
        return name, None
    import timm

    if name and timm.is_model(name):
        arch, _, tag = name.partition(".")
        tags = [t.partition(".")[2] for t in timm.list_pretrained(f"{arch}.*")]
        if tag and tag not in tags:
            raise ModelLoadError(
                f"Model {name!r}: timm has no weights tagged {tag!r} for {arch}; accepted tags: "
                f"{', '.join(tags) or '(none: it has no pretrained weights)'}, e.g. {arch}.{tags[0] if tags else ''}."
            )
        if not timm.models.is_model_in_modules(name, VIT_MODULES):
            raise ModelLoadError(
                f"Model {name!r} is not a plain ViT; attention extraction supports timm ViT models "
                f"({', '.join(VIT_MODULES)}), e.g. {', '.join(REGISTRY)}."
            )
        return name, None
    raise ModelLoadError(
        f"Unknown model {name!r}. Accepted: one of the aliases {', '.join(REGISTRY)}; "
        "a timm ViT name such as 'vit_small_patch16_224.dino'; or 'hf-hub:org/repo'."
    )


def hub_id(name: str) -> str | None:
    """The Hugging Face repo id the weights of `name` come from (None for shipped weights)."""
    timm_name, spec = resolve(name)
    if spec is not None:
        return spec.hub_id
    if timm_name.startswith("hf-hub:"):
        return timm_name[len("hf-hub:") :]
    if timm_name.startswith(("hf:", "open_clip:")):
        from attention.vit.backbone.load import hub_repo

        return hub_repo(timm_name)
    import timm

    cfg = timm.models.get_pretrained_cfg(timm_name)
    return cfg.hf_hub_id if cfg is not None else None


def is_cached(name: str) -> bool:
    """True when the weights of `name` are on disk (shipped, or in the HF cache): no network used."""
    repo = hub_id(name)
    if repo is None:  # shipped weights, a checkpoint, or a timm name with no pretrained weights on the hub
        spec = resolve(name)[1]
        if spec is None:
            return False
        return (
            os.path.exists(spec.checkpoint) if spec.checkpoint else (WEIGHTS_DIR / f"{spec.alias}.safetensors").exists()
        )
    from huggingface_hub import try_to_load_from_cache

    if resolve(name)[0].startswith("open_clip:"):
        from attention.vit.text.load import is_cached as open_clip_cached

        return open_clip_cached(resolve(name)[0])
    files = ("model.safetensors", "pytorch_model.bin", "open_clip_model.safetensors", "open_clip_pytorch_model.bin")
    return any(isinstance(try_to_load_from_cache(repo, f), str) for f in files)


def available(name: str) -> bool:
    """True when `load_vit(name)` can get weights now (cached, shipped, or the hub reachable)."""
    try:
        return is_cached(name) or (hub_id(name) is not None and weights.hub_reachable())
    except ModelLoadError:
        return False


def load_hub(timm_name: str) -> torch.nn.Module:
    """The model of `timm_name` with its weights from the hub (or its local cache), on the CPU in fp32.
    ModelLoadError naming the repo, the cause and the fix when they cannot be had (offline and not cached,
    a hub error, not a ViT)."""
    repo = hub_id(timm_name)
    if not is_cached(timm_name) and not weights.hub_reachable():
        from huggingface_hub import constants

        why = "HF_HUB_OFFLINE=1 is set" if constants.HF_HUB_OFFLINE else "the Hugging Face Hub cannot be reached"
        raise hub_errors.offline(timm_name, repo, why)
    try:
        model = weights.create(timm_name)
    except Exception as e:  # hub, network, file or config errors: each said as what it is (hub_errors)
        raise hub_errors.explain(e, timm_name, repo, hub_errors.architecture_of(timm_name)) from e
    return weights.check_vit(model, timm_name)


@dataclass(frozen=True)
class Startup:
    """The model the app starts with and, when it is not the default, a notice saying why."""

    model: str
    default_available: bool
    notice: str | None


def startup_model(default: str | None = None, fallback: str = OFFLINE_MODEL) -> Startup:
    """Pick the start-up model cheaply: `default` (default: `default_model()` now, which the
    operator's own checkpoint may have become) when its weights are cached or the hub is reachable
    (one short connect, none at all under HF_HUB_OFFLINE=1), else `fallback`."""
    default = default or default_model()
    if available(default):
        return Startup(default, True, None)
    repo = hub_id(default)
    spec = REGISTRY.get(fallback)
    what = spec.description.split(" (")[0] if spec else fallback
    return Startup(
        fallback,
        False,
        f"Offline: the weights of {default} ({repo}) are not in the local Hugging Face cache and the hub "
        f"cannot be reached, so the app starts with {fallback} ({what}) and digit examples. "
        f"Any model whose weights are cached still works: pick it in the Model box.",
    )
