"""Models loaded by name from other libraries than timm, through their own loaders:

    load_vit("hf:facebook/dinov2-small")               # transformers from_pretrained (AutoConfig decides)
    load_vit("open_clip:hf-hub:timm/ViT-B-16-SigLIP")   # open_clip create_model_and_transforms: its visual tower
    load_vit("open_clip:ViT-B-32/openai")               # open_clip's own name / pretrained tag

The Hugging Face cache, HF_HOME and HF_HUB_OFFLINE are honoured exactly as by those libraries. A
transformers repo of a CLIP or SigLIP model gives its vision tower (CLIPVisionModel /
SiglipVisionModel); one whose config names a *ForImageClassification architecture keeps its head (class
relevance). The normalisation of the repo's preprocessor_config.json is kept on the model
(`image_mean`/`image_std`, read by `backbone.hf`). Whatever loads is described (`describe`) before
it is returned: an undescribed class is refused (UnsupportedModelError).
"""

from __future__ import annotations

import json
import re

import torch

from attention.errors import ModelLoadError
from attention.vit.backbone import describe

HF, OPEN_CLIP = "hf:", "open_clip:"
_OC_NAME = re.compile(r"^(hf-hub:[\w.-]+/[\w.-]+|[\w.-]+(/[\w.-]+)?)$")


def is_named(name: str) -> bool:
    """Whether `name` is one of this module's (`hf:` or `open_clip:`)."""
    return name.startswith((HF, OPEN_CLIP))


def check_name(name: str) -> str:
    """`name` stripped when it is a well-formed `hf:org/repo` or `open_clip:...` name, else ModelLoadError."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    name = name.strip()
    if name.startswith(HF):
        try:
            validate_repo_id(name[len(HF) :])
            return name
        except HFValidationError:
            pass
    elif name.startswith(OPEN_CLIP) and _OC_NAME.match(name[len(OPEN_CLIP) :]):
        return name
    raise ModelLoadError(
        f"Model id {name!r} is not accepted; accepted: 'hf:org/repo' (a transformers repo, e.g. "
        "'hf:facebook/dinov2-small') or 'open_clip:NAME' ('open_clip:hf-hub:org/repo', 'open_clip:ViT-B-32/openai')."
    )


def hub_repo(name: str) -> str | None:
    """The Hugging Face repo a named model's files come from (None: open_clip's own download)."""
    if name.startswith(HF):
        return name[len(HF) :]
    rest = name[len(OPEN_CLIP) :]
    return rest[len("hf-hub:") :] if rest.startswith("hf-hub:") else None


def load_named(name: str) -> torch.nn.Module:
    """The model of an `hf:` or `open_clip:` name, on the CPU in fp32, described (UnsupportedModelError
    otherwise); ModelLoadError naming the repo and the cause when it cannot be loaded."""
    name = check_name(name)
    try:
        model = _load_hf(hub_repo(name)) if name.startswith(HF) else _load_open_clip(name[len(OPEN_CLIP) :])
    except ModelLoadError:
        raise
    except Exception as e:  # hub, file or config errors of the library: said as what they are
        from attention.vit.models import hub_errors

        raise hub_errors.explain(e, name, hub_repo(name)) from e
    describe(model)
    return model


def _load_hf(repo: str) -> torch.nn.Module:
    import transformers as T

    cfg = T.AutoConfig.from_pretrained(repo)
    kind = getattr(cfg, "model_type", "")
    archs = [a for a in (getattr(cfg, "architectures", None) or []) if a.endswith("ForImageClassification")]
    if kind in ("clip", "siglip"):
        cls = T.CLIPVisionModel if kind == "clip" else T.SiglipVisionModel
        model = cls.from_pretrained(repo)
    elif archs:
        model = T.AutoModelForImageClassification.from_pretrained(repo)
    else:
        model = T.AutoModel.from_pretrained(repo)
    _norm_from_processor(model, repo)
    return model.eval()


def _norm_from_processor(model: torch.nn.Module, repo: str) -> None:
    """The repo's preprocessor_config.json image_mean/image_std, when it has one, onto the model."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    try:
        path = hf_hub_download(repo, "preprocessor_config.json")
    except (EntryNotFoundError, LocalEntryNotFoundError, OSError):
        return
    cfg = json.loads(open(path, encoding="utf-8").read())
    if "image_mean" in cfg and "image_std" in cfg:
        model.image_mean, model.image_std = tuple(cfg["image_mean"]), tuple(cfg["image_std"])


def _load_open_clip(spec: str) -> torch.nn.Module:
    import open_clip

    if spec.startswith("hf-hub:"):
        model, _, _ = open_clip.create_model_and_transforms(spec)
    else:
        arch, _, tag = spec.partition("/")
        model, _, _ = open_clip.create_model_and_transforms(arch, pretrained=tag or None)
    visual = model.visual.eval()
    visual.clip_model = None  # the tower alone is served; the text tower is not kept
    return visual
