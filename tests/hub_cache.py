"""A fake Hub download for tests and benches: files laid out in the Hugging Face cache exactly as
`huggingface_hub` lays out a real download, so timm and huggingface-hub take their real code path
with HF_HUB_OFFLINE=1."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from huggingface_hub import constants


def add_to_hub_cache(
    repo: str, files: dict[str, bytes], cache_dir: str | Path | None = None, revision: str | None = None
) -> Path:
    """Put `files` (name -> content) into the HF hub cache as a download of `repo` would:
    blobs named by sha256, a snapshot folder of symlinks, refs/main. Returns the snapshot folder.

    cache_dir: default the active HF_HUB_CACHE (honours HF_HOME). revision: default a hash of the repo id.
    """
    root = Path(cache_dir or constants.HF_HUB_CACHE) / f"models--{repo.replace('/', '--')}"
    rev = revision or hashlib.sha1(repo.encode()).hexdigest()
    snap = root / "snapshots" / rev
    for d in (root / "blobs", snap, root / "refs"):
        d.mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(rev)
    for name, data in files.items():
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snap / name
        link.unlink(missing_ok=True)
        link.symlink_to(f"../../blobs/{blob.name}")
    return snap


def safetensors_bytes(model) -> bytes:
    """`model`'s state dict as a model.safetensors file's bytes (what the Hub serves for timm models)."""
    from safetensors.torch import save

    return save({k: v.contiguous() for k, v in model.state_dict().items()})


@contextmanager
def temporary_hf_home(home: str | Path) -> Iterator[Callable[[str, dict[str, bytes]], Path]]:
    """For the duration, HF_HOME is `home` (in the environment and in huggingface_hub's constants, which
    are read once at import) and loaded models are forgotten on entry and exit; yields `add(repo, files)`,
    `add_to_hub_cache` into that cache. HF_HUB_OFFLINE stays as it is (the test suite sets it to 1)."""
    from attention.vit.models import loader as models

    home = Path(home)
    saved_env = os.environ.get("HF_HOME")
    saved = {k: getattr(constants, k) for k in ("HF_HOME", "HF_HUB_CACHE")}
    os.environ["HF_HOME"] = str(home)
    constants.HF_HOME, constants.HF_HUB_CACHE = str(home), str(home / "hub")
    models.clear_cache()
    try:
        yield add_to_hub_cache
    finally:
        models.clear_cache()
        for k, v in saved.items():
            setattr(constants, k, v)
        if saved_env is None:
            os.environ.pop("HF_HOME", None)
        else:
            os.environ["HF_HOME"] = saved_env


# config.json of a tiny DINOv3 as timm's hub repos hold it: timm's `vit_small_patch16_dinov3` (an `Eva`:
# rotary positions, no absolute ones, CLS + 4 registers, patch 16) narrowed to 2 layers of width 32.
DINOV3_TINY = {
    "architecture": "vit_small_patch16_dinov3",
    "num_classes": 0,
    "model_args": {"embed_dim": 32, "depth": 2, "num_heads": 2, "img_size": 64},
    "pretrained_cfg": {
        "mean": [0.485, 0.456, 0.406],
        "std": [0.229, 0.224, 0.225],
        "input_size": [3, 64, 64],
        "num_classes": 0,
        "license": "dinov3-license",
    },
}
DINOV3_REPO = "testorg/tiny_patch16_dinov3.lvd1689m"  # a name `family_of` reads as DINOv3


def tiny_dinov3(seed: int = 0):
    """A randomly initialised model of DINOV3_TINY (eval mode), the weights a fixture serves."""
    import timm
    import torch

    torch.manual_seed(seed)
    cfg = DINOV3_TINY
    return timm.create_model(cfg["architecture"], pretrained=False, num_classes=0, **cfg["model_args"]).eval()


def add_tiny_dinov3(add: Callable[[str, dict[str, bytes]], Path], repo: str = DINOV3_REPO, seed: int = 0):
    """Put a tiny DINOv3 (config.json + model.safetensors) into the hub cache through `add` (as yielded by
    `temporary_hf_home`); returns the model whose weights were written (`load_vit("hf-hub:" + repo)` loads them)."""
    import json

    ref = tiny_dinov3(seed)
    add(repo, {"config.json": json.dumps(DINOV3_TINY).encode(), "model.safetensors": safetensors_bytes(ref)})
    return ref
