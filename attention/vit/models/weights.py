"""Building a model with its weights: timm's `create` (any input size where the architecture allows it),
the files shipped in weights/ (`load_local`: mnist_vit), whether the Hub can be reached, and `check_vit`,
which admits only a ViT the engine reads exactly whatever the source (`sources.load_hub` reads the Hub,
`checkpoint.load` an operator's file).

    model = load_local("mnist_vit")                    # the shipped weights, on the CPU in fp32
"""

from __future__ import annotations

import json
from urllib.parse import urlparse

import torch

from attention.config import WEIGHTS_DIR
from attention.crowd import net
from attention.errors import ModelLoadError
from attention.vit.backbone import describe
from attention.vit.models import hub_errors
from attention.vit.models.registry import FIXED_SIZE, REGISTRY


def check_vit(model: torch.nn.Module, name: str) -> torch.nn.Module:
    """`model` when the engine reads its attention exactly (`backbone.describe`, which
    `capture.check_supported` is), else ModelLoadError for a model that is no ViT, UnsupportedModelError
    naming the block class and why."""

    if not hasattr(model, "patch_embed") or not hasattr(model, "blocks"):
        raise ModelLoadError(
            f"Model {name!r} is a {type(model).__name__}, not a timm ViT; "
            f"attention extraction supports ViTs (e.g. {', '.join(REGISTRY)})."
        )
    describe(model)
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
        if "dynamic_img_size" not in str(e) or not arch or not timm.models.is_model_in_modules(arch, FIXED_SIZE):
            raise  # NaFlexVit and others: hub_errors says what cannot be built
        return timm.create_model(timm_name, pretrained=True)


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


def hub_reachable(timeout: float = 1.5) -> bool:
    """Whether the Hugging Face Hub can be reached: False at once under HF_HUB_OFFLINE=1,
    else one short TCP connect, remembered for a minute (no long time-outs on each request)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    return net.reachable(urlparse(constants.ENDPOINT).hostname or "", 443, timeout=timeout)
