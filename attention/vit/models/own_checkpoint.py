"""The operator's own checkpoint on the command line: `python app.py --model PATH --arch NAME`, the CLI's
`--weights PATH --arch NAME`, and `register_checkpoint`, which makes it a registry entry (through
`registry.register`) that visitors may pick, and with `default=True` the default model. A model folder (a
transformers save_pretrained folder, an open_clip one: `folder`) is named the same way, without --arch.

    alias = register_checkpoint("ckpt.pth", "vit_small_patch16_224", default=True)  # the app's, the CLI's
    alias = register_checkpoint("my_dinov2")                                          # a folder: "dir:my_dinov2"
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attention.errors import AttentionError, CheckpointError
from attention.vit.models import registry
from attention.vit.models.checkpoint import alias_for, checkpoint_spec
from attention.vit.models.loader import load_vit


def register_checkpoint(
    path: str | Path,
    arch: str | None = None,
    *,
    checkpoint_key: str | None = None,
    family: str | None = None,
    alias: str | None = None,
    default: bool = False,
) -> str:
    """Make the checkpoint a registry entry (its alias, `alias_for(path)` unless given) that visitors may pick
    like any listed model, and with `default` the default model. Loads it once at once, so a bad file is
    reported now (CheckpointError), not at the first request. Without `arch`, `path` must be a model folder
    (alias `dir:<name>`). Returns the alias."""
    from attention.vit.models import folder

    if arch:
        spec = checkpoint_spec(path, arch, checkpoint_key, family, alias or alias_for(path))
    elif (spec := folder.folder_spec(path, family, alias or folder.alias_for(path))) is None:
        raise CheckpointError(
            f"{path} is a file without --arch, or not a model folder; accepted: a checkpoint file with --arch (its "
            "timm architecture), or a transformers save_pretrained / open_clip folder alone."
        )
    registry.register(spec)
    try:
        load_vit(spec.alias)
    except Exception:
        registry.unregister(spec.alias)
        raise
    if default:
        registry.set_default_model(spec.alias)
    return spec.alias


def checkpoint_args(p: argparse.ArgumentParser, weights: str = "--weights") -> None:
    """The options naming your own checkpoint (this CLI's --weights; app.py's --model)."""
    p.add_argument(
        weights,
        type=Path,
        default=None,
        help="your own checkpoint (.pth, .pt, .bin or .safetensors, with --arch), or a model folder "
        "(transformers save_pretrained, open_clip)",
    )
    p.add_argument(
        "--arch", default=None, help="its timm architecture, e.g. vit_small_patch16_224 (with the checkpoint)"
    )
    p.add_argument(
        "--checkpoint-key", default=None, help="the key its weights sit under (default: teacher when present, as DINO)"
    )
    p.add_argument(
        "--family",
        default=None,
        help=f"how images are fed: {', '.join(registry.FAMILIES)} (default: the arch's)",
    )


def use_checkpoint(path: Path | None, arch: str | None, key: str | None, family: str | None, **kw) -> str | None:
    """Register the checkpoint given on the command line (`checkpoint.register_checkpoint`) and return its alias;
    None when none is given. Raises CheckpointError when only one of the checkpoint and --arch is given."""
    if path is None and arch is None:
        return None
    if path is None or (not arch and not Path(path).is_dir()):
        raise CheckpointError(
            "Give both the checkpoint file and --arch (its timm architecture), a model folder alone, or neither."
        )
    alias = register_checkpoint(path, arch, checkpoint_key=key, family=family, **kw)
    report = getattr(load_vit(alias), "checkpoint_report", "loaded from the folder by its library")
    print(f"{alias}: {registry.REGISTRY[alias].description}: {report}", file=sys.stderr)
    return alias


def serve_args(argv: list[str]) -> str | None:
    """`python app.py [--model PATH --arch NAME [--checkpoint-key K] [--family F]]`: the operator's own
    checkpoint becomes a registry entry and the default model (defaults from the settings
    ATTENTION_CHECKPOINT, ATTENTION_ARCH, ATTENTION_CHECKPOINT_KEY, ATTENTION_FAMILY). Returns its alias, or
    None when none is named; a bad checkpoint stops the process with its message (SystemExit), no traceback."""
    from attention.config import SETTINGS

    p = argparse.ArgumentParser(prog="python app.py", description="Attention Explorer (Gradio app)")
    checkpoint_args(p, "--model")
    p.set_defaults(
        model=Path(SETTINGS.checkpoint) if SETTINGS.checkpoint else None,
        arch=SETTINGS.checkpoint_arch or None,
        checkpoint_key=SETTINGS.checkpoint_key or None,
        family=SETTINGS.checkpoint_family or None,
    )
    args = p.parse_args(argv)
    try:
        return use_checkpoint(args.model, args.arch, args.checkpoint_key, args.family, default=True)
    except AttentionError as e:
        raise SystemExit(f"error: {e}") from None
