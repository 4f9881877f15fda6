"""Your own checkpoint in the explorer: a fine-tuned or self-trained ViT's weights on a timm architecture.

    model = load_vit("ckpt.pth", arch="vit_small_patch16_224")          # .pth / .pt / .bin / .safetensors
    model = load_vit("checkpoint.pth", arch="vit_small_patch16_224", checkpoint_key="teacher", family="dino")
    alias = register_checkpoint("ckpt.pth", "vit_small_patch16_224", default=True)  # the app's, the CLI's

DINO's conventions are understood (facebookresearch/dino utils.load_pretrained_weights): the weights
may sit under a key (`teacher`, `student`, `model`, `state_dict`; chosen with `checkpoint_key`, DINO's
--checkpoint_key; by default `teacher` when present, as DINO), and key names may carry `module.`
(DistributedDataParallel) and `backbone.` (DINO's MultiCropWrapper) prefixes, which are removed; tensors
outside the backbone (DINO's projection head, a classifier's head) are left out and reported.
Pickled checkpoints are read with `torch.load(weights_only=True)`: tensors, numbers, strings and
containers only (and argparse.Namespace, which DINO's full checkpoints carry as "args"): a pickle
holding any other object is refused unread, never executed.

Only the operator's command line or settings name a checkpoint file (`python app.py --model PATH
--arch NAME`, ATTENTION_CHECKPOINT): a visitor's model name is never read as a path (`models.resolve`).
"""

from __future__ import annotations

import argparse
import pickle
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from attention.errors import CheckpointError, without_unsafe_advice

KEYS = ("teacher", "model", "state_dict", "model_state_dict", "module", "student")  # tried in this order
PREFIXES = ("module.", "backbone.")
SAFETENSORS = (".safetensors",)


@dataclass(frozen=True)
class Report:
    """What loading a checkpoint did: the key its weights came from, the prefixes removed, and the
    tensors left out (not the architecture's: DINO's head, a classifier's head)."""

    key: str | None
    prefixes: tuple[str, ...]
    ignored: tuple[str, ...]
    formats: tuple[str, ...] = ()  # formats detected and converted (`backbone.formats`)

    def __str__(self) -> str:
        parts = [f"weights from key {self.key!r}" if self.key else "weights at the top level"]
        if self.formats:
            parts.append("formats converted: " + ", ".join(self.formats))
        if self.prefixes:
            parts.append("prefixes removed: " + ", ".join(repr(p) for p in self.prefixes))
        if self.ignored:
            shown = ", ".join(self.ignored[:5]) + (
                f" and {len(self.ignored) - 5} more" if len(self.ignored) > 5 else ""
            )
            parts.append(f"{len(self.ignored)} tensors not in the architecture left out ({shown})")
        return "; ".join(parts)


def read(path: str | Path) -> dict:
    """The checkpoint file's contents: a dict (name -> tensor, or nested). .safetensors through safetensors,
    anything else through `torch.load(weights_only=True)` on the CPU. Raises CheckpointError for a missing
    or unreadable file and for a pickle holding objects other than tensors and plain containers."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"No checkpoint file at {path}; accepted: a .pth, .pt, .bin or .safetensors file.")
    if path.suffix.lower() in SAFETENSORS:
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(path, device="cpu")
        except (SafetensorError, OSError, ValueError) as e:
            raise CheckpointError(f"{path} is not a readable safetensors file ({e}).") from None
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        glob = re.search(r"GLOBAL:? (?:GLOBAL )?([\w.]+)", str(e))
        if glob is None:  # not a pickle of objects at all: a damaged file or another format
            raise CheckpointError(
                f"{path} is not a PyTorch checkpoint torch.load can read ({_reason(e)}); accepted: a file written "
                "by torch.save, or .safetensors."
            ) from None
        raise CheckpointError(
            f"{path} holds Python objects other than tensors: code (it names {glob.group(1)}); refused unread, it is "
            "not loaded and no option here loads it. Accepted: a pickle of tensors, numbers, strings and containers "
            "only. Fix: save the weights alone, torch.save(model.state_dict(), path), or as .safetensors."
        ) from None
    except Exception as e:  # torch.load on a file that is no checkpoint raises anything (KeyError on a text file)
        raise CheckpointError(
            f"{path} is not a PyTorch checkpoint torch.load can read ({type(e).__name__}: {_reason(e)}); accepted: "
            "a file written by torch.save, or .safetensors."
        ) from None
    if not isinstance(data, Mapping):
        raise CheckpointError(
            f"{path} holds a {type(data).__name__}, not a dict of tensors; accepted: a state dict, or a dict "
            f"holding one under a key such as {', '.join(KEYS)}."
        )
    return dict(data)


def _reason(e: Exception) -> str:
    """What torch.load said went wrong, without its advice to load the file with weights_only=False
    (which would run any code the file holds): the paragraphs of its message that do not give it."""
    return without_unsafe_advice(str(e))[:300] or "not a pickle of tensors"


def _is_state_dict(d: Mapping) -> bool:
    return bool(d) and all(isinstance(v, torch.Tensor) for v in d.values())


def state_dict(data: Mapping, checkpoint_key: str | None = None) -> tuple[dict[str, torch.Tensor], Report]:
    """The backbone's tensors from a checkpoint's contents, by DINO's conventions (see the module
    docstring), and a Report of what was done. Raises CheckpointError naming the keys there are when
    `checkpoint_key` is absent or no state dict is found."""
    key = checkpoint_key.strip() if checkpoint_key and checkpoint_key.strip() else None
    if key is not None:
        if key not in data:
            raise CheckpointError(
                f"The checkpoint has no key {key!r}; its top-level keys: {', '.join(map(str, list(data)[:12]))}."
            )
        sd = data[key]
    elif _is_state_dict(data):
        sd = data
    else:
        key = next((k for k in KEYS if isinstance(data.get(k), Mapping) and data[k]), None)
        if key is None:
            raise CheckpointError(
                "Found no weights in the checkpoint: its top-level keys are "
                f"{', '.join(map(str, list(data)[:12]))}; accepted: a state dict, or one under {', '.join(KEYS)} "
                "(or name it: checkpoint_key / --checkpoint-key)."
            )
        sd = data[key]
    if not isinstance(sd, Mapping):
        raise CheckpointError(f"The checkpoint's {key!r} is a {type(sd).__name__}, not a dict of tensors.")
    tensors = {str(k): v for k, v in sd.items() if isinstance(v, torch.Tensor)}
    removed: list[str] = []
    ignored: tuple[str, ...] = ()
    if any(k.startswith("module.") for k in tensors):  # DistributedDataParallel's wrapper
        removed.append("module.")
        tensors = {k.removeprefix("module."): v for k, v in tensors.items()}
    if any(k.startswith("backbone.") for k in tensors):  # DINO's MultiCropWrapper: the rest is its head
        removed.append("backbone.")
        ignored = tuple(k for k in tensors if not k.startswith("backbone."))
        tensors = {k.removeprefix("backbone."): v for k, v in tensors.items() if k.startswith("backbone.")}
    return tensors, Report(key, tuple(removed), ignored)


HEADS = ("head", "head_dist", "heads", "fc_norm", "attn_pool", "mask_token")  # not read by the attention maps


def backbone_extras(model: torch.nn.Module, extra: list[str]) -> list[str]:
    """The tensors of `extra` (names `model` lacks) that belong to its backbone: under one of its modules
    (`blocks.0.attn.q_bias`, `blocks.12.*` of a deeper model) or a token or embedding at the top
    (`reg_token`, `dist_token`), not a head (`HEADS`: a classifier's, DINO's, the pooling, the training mask)."""
    children = {n for n, _ in model.named_children()}
    tops = children | {"cls_token", "reg_token", "dist_token", "pos_embed", "pos_embed_cls", "storage_tokens"}
    return [k for k in extra if k.split(".")[0] in tops - set(HEADS)]


def suggest_arch(arch: str, extras: list[str], tensors: dict[str, torch.Tensor]) -> str | None:
    """A timm architecture that has `extras` when one is evident from their names: `<arch>_qkvb` for q/v
    biases, `<arch>` with `reg<n>` for n registers, DeiT's `distilled` variant for a distillation token."""
    import timm

    base = arch.split(".")[0]
    names = set()
    if any(re.search(r"\.(q|k|v)_bias$", k) for k in extras):
        names.add(f"{base}_qkvb")
    if "reg_token" in extras:
        n = tensors["reg_token"].shape[1]
        names.add(re.sub(r"(patch\d+)_", rf"\1_reg{n}_", base, count=1))
    if "dist_token" in extras:
        names.add(re.sub(r"^deit_(\w+?)_patch", r"deit_\1_distilled_patch", base))
    found = sorted(n for n in names if n != base and timm.is_model(n))
    return found[0] if found else None


def fit(model: torch.nn.Module, tensors: dict[str, torch.Tensor], report: Report, arch: str, path: str) -> Report:
    """Load `tensors` into `model` (timm `arch`), strictly: every tensor the architecture has must be there
    with its shape, and no backbone tensor it lacks (`backbone_extras`: q/v biases, registers, a deeper
    model's blocks change the maps). Tensors outside the backbone (heads) are left out and added to the
    report. Raises CheckpointError naming the first tensor whose shape differs (both shapes), the tensors
    missing, or the backbone tensors the architecture lacks (and the architecture that has them, when evident)."""
    own = model.state_dict()
    for name, want in own.items():
        got = tensors.get(name)
        if got is not None and tuple(got.shape) != tuple(want.shape):
            raise CheckpointError(
                f"Checkpoint {path} does not fit {arch}: tensor {name!r} is {tuple(got.shape)} in the checkpoint and "
                f"{tuple(want.shape)} in {arch}. Fix: name the architecture it was trained with (--arch: patch size, "
                "width, depth and input size must match)."
            )
    missing = [k for k in own if k not in tensors]
    if missing:
        shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        has = ", ".join(list(tensors)[:4])
        raise CheckpointError(
            f"Checkpoint {path} lacks {len(missing)} of the {len(own)} tensors {arch} needs: {shown}. Its tensors are "
            f"named like {has or '(none)'}. Fix: check --arch, and --checkpoint-key when the weights sit under a key."
        )
    extra = [k for k in tensors if k not in own]
    lacking = backbone_extras(model, extra)
    if lacking:
        shown = ", ".join(lacking[:6]) + (f" and {len(lacking) - 6} more" if len(lacking) > 6 else "")
        better = suggest_arch(arch, lacking, tensors)
        fix = f"--arch {better}, which has them" if better else "name the architecture it was trained with (--arch)"
        raise CheckpointError(
            f"Checkpoint {path} holds {len(lacking)} backbone tensors {arch} lacks: {shown}. Loaded without them the "
            f"maps would be another model's; refused. Fix: {fix}."
        )
    model.load_state_dict({k: v for k, v in tensors.items() if k in own}, strict=True)
    return Report(report.key, report.prefixes, report.ignored + tuple(extra))


def build(arch: str, num_classes: int = 0) -> torch.nn.Module:
    """A randomly initialised timm `arch` taking any image size, headless. With a pretrained tag
    (`vit_small_patch16_224.dino`) the model carries that tag's preprocessing (mean, std, input size), else
    the architecture's default tag's. CheckpointError when timm has no such architecture."""
    import timm

    arch = (arch or "").strip()
    if not arch or not timm.is_model(arch.split(".")[0]):
        raise CheckpointError(
            f"Architecture {arch!r} is not a timm model; accepted: a timm ViT name such as 'vit_small_patch16_224' "
            "or 'vit_small_patch16_dinov3' (timm.list_models('vit_*'))."
        )
    try:
        return timm.create_model(arch, pretrained=False, num_classes=num_classes, dynamic_img_size=True)
    except (RuntimeError, TypeError, ValueError) as e:
        raise CheckpointError(f"timm cannot build {arch!r} for any image size ({type(e).__name__}: {e}).") from None


def load(path: str | Path, arch: str, checkpoint_key: str | None = None) -> torch.nn.Module:
    """`arch` with the checkpoint's weights (see the module docstring); `model.checkpoint_report` says what was
    done. Raises CheckpointError (unreadable, no weights, missing tensors, a shape that does not fit)."""
    from attention.vit.backbone import formats  # the formats people hold: detected, converted to timm's names

    model = build(arch)
    tensors, report = state_dict(read(path), checkpoint_key)
    if classes := formats.head_classes(tensors):  # a classifier's head is kept (class relevance)
        model = build(arch, classes)
    tensors, found = formats.convert(tensors, model)
    model.checkpoint_report = fit(model, tensors, report, arch, str(path))
    if found:
        model.checkpoint_report = replace(model.checkpoint_report, formats=found)
    return model


def alias_for(path: str | Path) -> str:
    """The registry alias of a checkpoint file: `ckpt:<file stem>` (letters, digits, '-', '_', '.')."""
    return "ckpt:" + re.sub(r"[^A-Za-z0-9_.-]", "_", Path(path).stem)[:60]


def checkpoint_spec(
    path: str | Path, arch: str, checkpoint_key: str | None = None, family: str | None = None, alias: str | None = None
):
    """A `models.ModelSpec` for the checkpoint at `path` on timm `arch` (not registered): alias default the
    absolute path (with `#key`), family default the architecture's (`models.family_of`)."""
    from attention.vit.models import registry as models

    path = Path(path).expanduser().resolve()
    fam = (family or "").strip().lower() or models.family_of(arch or "")
    if fam not in models.FAMILIES:
        raise CheckpointError(f"Family {fam!r} is not known; accepted: {', '.join(models.FAMILIES)}.")
    key = checkpoint_key.strip() if checkpoint_key and checkpoint_key.strip() else None
    return models.ModelSpec(
        alias or f"{path}{'#' + key if key else ''}",
        (arch or "").strip(),
        f"your checkpoint {path.name} on {(arch or '').strip()}",
        models.FAMILIES[fam].resolution,
        fam,
        checkpoint=str(path),
        checkpoint_key=key,
    )
