"""Models loaded by name from other libraries than timm, through their own loaders:

    load_vit("hf:facebook/dinov2-small")               # transformers from_pretrained (AutoConfig decides)
    load_vit("open_clip:hf-hub:timm/ViT-B-16-SigLIP")   # open_clip create_model_and_transforms: its visual tower
    load_vit("open_clip:ViT-B-32/openai")               # open_clip's own name / pretrained tag

A folder on disk, the operator's (`load_vit(folder)`, `--weights`/`--model FOLDER`; never a visitor's name):

    load_folder("my_dinov2")   # transformers save_pretrained (config.json + weights): from_pretrained, local files only
    load_folder("my_clip")     # open_clip (open_clip_config.json + its weights, "local-dir:"): its visual tower

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


def _load_hf(repo: str, **kw) -> torch.nn.Module:
    """A transformers repo's (or folder's: kw local_files_only=True) model: a CLIP/SigLIP's vision tower, a
    *ForImageClassification with its head, else AutoModel; its processor's normalisation on it."""
    import transformers as T

    cfg = T.AutoConfig.from_pretrained(repo, **kw)
    kind = getattr(cfg, "model_type", "")
    archs = [a for a in (getattr(cfg, "architectures", None) or []) if a.endswith("ForImageClassification")]
    if kind in ("clip", "siglip"):
        cls = T.CLIPVisionModel if kind == "clip" else T.SiglipVisionModel
        model = cls.from_pretrained(repo, **kw)
    elif archs:
        model = T.AutoModelForImageClassification.from_pretrained(repo, **kw)
    else:
        model = T.AutoModel.from_pretrained(repo, **kw)
    _norm_from_processor(model, repo, local=bool(kw))
    return model.eval()


def _norm_from_processor(model: torch.nn.Module, repo: str, local: bool = False) -> None:
    """The repo's (`local`: the folder's) preprocessor_config.json image_mean/image_std, when it has one, onto
    the model."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    try:
        path = f"{repo}/preprocessor_config.json" if local else hf_hub_download(repo, "preprocessor_config.json")
        cfg = json.loads(open(path, encoding="utf-8").read())
    except (EntryNotFoundError, LocalEntryNotFoundError, OSError):
        return
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


HF_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
OPEN_CLIP_WEIGHTS = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")


def folder_kind(path) -> str | None:
    """ "transformers" for a save_pretrained folder (config.json and its weights), "open_clip" for an open_clip
    one (open_clip_config.json and its weights), None for anything else (not a folder, no weights)."""
    from pathlib import Path

    p = Path(path)
    if not p.is_dir():
        return None
    if (p / "config.json").is_file() and any((p / f).is_file() for f in HF_WEIGHTS):
        return "transformers"
    if (p / "open_clip_config.json").is_file() and any((p / f).is_file() for f in OPEN_CLIP_WEIGHTS):
        return "open_clip"
    return None


def weights_file(path) -> str:
    """The folder's weights file (its identity for the loader's cache), else the folder."""
    from pathlib import Path

    found = [Path(path) / f for f in (*HF_WEIGHTS, *OPEN_CLIP_WEIGHTS) if (Path(path) / f).is_file()]
    return str(found[0]) if found else str(path)


def load_folder(path) -> torch.nn.Module:
    """The model saved in folder `path` (`folder_kind`), on the CPU in fp32, described (UnsupportedModelError
    otherwise): transformers' through from_pretrained(local_files_only=True), open_clip's visual tower through
    create_model("local-dir:..."). ModelLoadError naming the folder and what is accepted when it is neither,
    or naming the cause when its files cannot be read."""
    kind = folder_kind(path)
    if kind is None:
        raise ModelLoadError(
            f"{path} is not a model folder; accepted: a transformers save_pretrained folder (config.json with "
            f"{' or '.join(HF_WEIGHTS[::2])}) or an open_clip one (open_clip_config.json with "
            f"{' or '.join(OPEN_CLIP_WEIGHTS)})."
        )
    try:
        if kind == "transformers":
            model = _load_hf(str(path), local_files_only=True)
        else:
            import open_clip

            visual = open_clip.create_model(f"local-dir:{path}").visual.eval()
            visual.clip_model = None
            model = visual
    except Exception as e:  # the library's file or config errors, said as what they are
        raise ModelLoadError(f"The {kind} folder {path} cannot be loaded ({type(e).__name__}: {str(e)[:300]}).") from e
    describe(model)
    return model


def load_open_clip_checkpoint(path, arch: str, checkpoint_key: str | None = None) -> torch.nn.Module:
    """The visual tower of open_clip model `arch` ("open_clip:NAME", NAME one of `open_clip.list_models()`) with
    the weights of one's own checkpoint file (open_clip's training writes {"epoch", "state_dict": {"module.*"}}),
    read as every checkpoint is (`models.checkpoint.read`: tensors only, never code; its key and `module.`
    prefix found) and loaded strictly. CheckpointError naming the architectures accepted, or the tensors that do
    not fit."""
    import open_clip

    from attention.errors import CheckpointError
    from attention.vit.models import checkpoint

    name = arch[len(OPEN_CLIP) :].strip()
    if name not in open_clip.list_models():
        raise CheckpointError(
            f"Architecture {arch!r} is not an open_clip model; accepted: 'open_clip:NAME' with NAME one of "
            "open_clip.list_models(), e.g. 'open_clip:ViT-B-32' (the weights are your file's)."
        )
    tensors, report = checkpoint.state_dict(checkpoint.read(path), checkpoint_key)
    clip = open_clip.create_model(name)
    own = clip.state_dict()
    bad = sorted(set(own) ^ set(tensors)) + [k for k in own if k in tensors and own[k].shape != tensors[k].shape]
    if bad:
        raise CheckpointError(
            f"Checkpoint {path} does not fit {arch}: {len(bad)} tensors missing, extra or of another shape "
            f"({', '.join(bad[:5])}). Fix: name the open_clip model it was trained as."
        )
    clip.load_state_dict(tensors, strict=True)
    visual = clip.visual.eval()
    visual.clip_model = None
    visual.checkpoint_report = report
    return visual
