"""A model saved in a folder, named by its path: a transformers `save_pretrained` folder or an open_clip one
(`backbone.load.folder_kind`). Only the operator names one (`load_vit(folder)` in one's own code, the CLI's
`--weights FOLDER`, `python app.py --model FOLDER`): `sources.resolve` never reads a visitor's name as a path,
and a folder becomes a visitor's choice only as the registry alias the operator's command line gives it.

    spec = folder_spec("my_dinov2")      # ModelSpec("dir:my_dinov2", "folder:transformers", ..., checkpoint=abs path)
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from attention.vit.models.registry import FAMILIES, ModelSpec, family_of

PREFIX = "folder:"  # a folder spec's timm_name: "folder:transformers" or "folder:open_clip"


def alias_for(path: str | os.PathLike) -> str:
    """The registry alias of a model folder: `dir:<its name>` (letters, digits, '-', '_', '.')."""
    return "dir:" + re.sub(r"[^A-Za-z0-9_.-]", "_", Path(path).resolve().name)[:60]


def _family(path: Path, kind: str) -> str:
    """How its images are fed: its config's model_type's family (DINOv2, DINOv2 with registers, DINOv3), else timm's."""
    if kind != "transformers":
        return "timm"
    try:
        model_type = str(json.loads((path / "config.json").read_text(encoding="utf-8")).get("model_type", ""))
    except (OSError, ValueError, AttributeError):
        return "timm"
    return family_of(model_type.replace("_", "-"))


def folder_spec(path: str | os.PathLike, family: str | None = None, alias: str | None = None) -> ModelSpec | None:
    """A ModelSpec for the model folder at `path` (not registered), or None when `path` is not one. family:
    how images are fed (a key of FAMILIES; default its config's model type's). alias: default the absolute path."""
    from attention.errors import ModelLoadError
    from attention.vit.backbone.load import folder_kind

    kind = folder_kind(path)
    if kind is None:
        return None
    p = Path(path).expanduser().resolve()
    fam = (family or "").strip().lower() or _family(p, kind)
    if fam not in FAMILIES:
        raise ModelLoadError(f"Family {fam!r} is not known; accepted: {', '.join(FAMILIES)}.")
    return ModelSpec(
        alias or str(p),
        PREFIX + kind,
        f"your {kind} folder {p.name}",
        FAMILIES[fam].resolution,
        fam,
        checkpoint=str(p),
    )


def is_folder_spec(spec: ModelSpec | None) -> bool:
    """Whether `spec` is a model folder's."""
    return spec is not None and spec.timm_name.startswith(PREFIX)
