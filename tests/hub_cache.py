"""A fake Hub download for tests and benches: files laid out in the Hugging Face cache exactly as
`huggingface_hub` lays out a real download, so timm and huggingface-hub take their real code path
with HF_HUB_OFFLINE=1."""

from __future__ import annotations

import hashlib
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
