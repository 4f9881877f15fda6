"""Where a model's weights come from, and the model the app starts with.

`models.load_vit` builds a model here: from the Hugging Face Hub through timm (`load_hub`: any
input size where the architecture allows it, each failure said as what it is by `hub_errors`),
or from the files shipped in weights/ (`load_local`: mnist_vit); an operator's checkpoint is
read by `checkpoint.load`. Whatever the source, `check_vit` admits only a ViT the engine reads
exactly. `startup_model` picks the start-up model by whether its weights are at hand.

    model = load_hub("vit_small_patch16_224.dino")     # uncached: the model, not yet on a device
    s = startup_model()                                # Startup(model, default_available, notice)
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch

from attention.config import WEIGHTS_DIR
from attention.errors import ModelLoadError
from attention.vit.models import hub_errors
from attention.vit.models import loader as models


def check_vit(model: torch.nn.Module, name: str) -> torch.nn.Module:
    """`model` when the engine reads its attention exactly (`capture.check_supported`), else
    ModelLoadError for a model that is no ViT, UnsupportedModelError naming the block class and why."""
    from attention.vit.engine.capture import check_supported

    if not hasattr(model, "patch_embed") or not hasattr(model, "blocks"):
        raise ModelLoadError(
            f"Model {name!r} is a {type(model).__name__}, not a timm ViT; "
            f"attention extraction supports ViTs (e.g. {', '.join(models.REGISTRY)})."
        )
    check_supported(model)
    return model


def create(timm_name: str):
    """timm.create_model with pretrained weights, any input size where the architecture allows it
    (`dynamic_img_size`; BEiT and the relpos ViTs have tables for one grid and take their trained size).
    A classifier keeps its head (class relevance, "Why this class?"); a backbone has none."""
    import timm

    try:
        return timm.create_model(timm_name, pretrained=True, dynamic_img_size=True)
    except TypeError as e:
        arch = hub_errors.architecture_of(timm_name)
        if "dynamic_img_size" not in str(e) or not arch or not timm.models.is_model_in_modules(arch, models.FIXED_SIZE):
            raise  # NaFlexVit and others: hub_errors says what cannot be built
        return timm.create_model(timm_name, pretrained=True)


def load_hub(timm_name: str) -> torch.nn.Module:
    """The model of `timm_name` with its weights from the hub (or its local cache), on the CPU in fp32.
    ModelLoadError naming the repo, the cause and the fix when they cannot be had (offline and not cached,
    a hub error, not a ViT)."""
    repo = models.hub_id(timm_name)
    if not models.is_cached(timm_name) and not models.hub_reachable():
        from huggingface_hub import constants

        why = "HF_HUB_OFFLINE=1 is set" if constants.HF_HUB_OFFLINE else "the Hugging Face Hub cannot be reached"
        raise hub_errors.offline(timm_name, repo, why)
    try:
        model = create(timm_name)
    except Exception as e:  # hub, network, file or config errors: each said as what it is (hub_errors)
        raise hub_errors.explain(e, timm_name, repo, hub_errors.architecture_of(timm_name)) from e
    return check_vit(model, timm_name)


def local_config(alias: str) -> dict:
    """The json config of shipped weights `weights/<alias>.json` (architecture, model_args, pretrained_cfg)."""
    path = WEIGHTS_DIR / f"{alias}.json"
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise ModelLoadError(f"Shipped weights config {path} is missing ({e}); reinstall the app's files.") from e


def build_local(cfg: dict) -> torch.nn.Module:
    """A randomly initialised timm model from a shipped config (used to train, then to load)."""
    import timm

    model = timm.create_model(cfg["architecture"], pretrained=False, dynamic_img_size=True, **cfg["model_args"])
    model.pretrained_cfg = {**model.pretrained_cfg, **cfg["pretrained_cfg"]}
    return model


def load_local(alias: str) -> torch.nn.Module:
    """The shipped model `alias` (weights/<alias>.json and .safetensors), on the CPU in fp32."""
    from safetensors.torch import load_file

    model = build_local(local_config(alias))
    path = WEIGHTS_DIR / f"{alias}.safetensors"
    try:
        model.load_state_dict(load_file(path))
    except (OSError, RuntimeError) as e:
        raise ModelLoadError(f"Shipped weights {path} cannot be loaded: {e}") from e
    return check_vit(model, alias)


@dataclass(frozen=True)
class Startup:
    """The model the app starts with and, when it is not the default, a notice saying why."""

    model: str
    default_available: bool
    notice: str | None


def startup_model(default: str | None = None, fallback: str = models.OFFLINE_MODEL) -> Startup:
    """Pick the start-up model cheaply: `default` (default: `models.default_model()` now, which the
    operator's own checkpoint may have become) when its weights are cached or the hub is reachable
    (one short connect, none at all under HF_HUB_OFFLINE=1), else `fallback`."""
    default = default or models.default_model()
    if models.available(default):
        return Startup(default, True, None)
    repo = models.hub_id(default)
    spec = models.REGISTRY.get(fallback)
    what = spec.description.split(" (")[0] if spec else fallback
    return Startup(
        fallback,
        False,
        f"Offline: the weights of {default} ({repo}) are not in the local Hugging Face cache and the hub "
        f"cannot be reached, so the app starts with {fallback} ({what}) and digit examples. "
        f"Any model whose weights are cached still works: pick it in the Model box.",
    )
