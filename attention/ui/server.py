"""What `launch()` is given besides the Blocks: the guard in front of Gradio's app (`attention.guard`)
and the sweep of the folders Gradio's cache deletion leaves.

`launch_kwargs(...)` is a mapping whose `app_kwargs` is built anew at each read: Gradio writes into the
`app_kwargs` dict it is given (its lifespan, which holds that launch's MCP server), so one dict shared
by two launches in a process (tests) would start the first launch's server again in the second.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from gradio.utils import get_upload_folder
from starlette.middleware import Middleware

from attention.cache import sweep_empty_dirs
from attention.config import Settings
from attention.guard import Guard, GuardLimits

MB = 1 << 20
SWEEP_EVERY = 300.0  # seconds between sweeps of empty folders (Gradio deletes files every 300 s here)


def guard_limits(s: Settings) -> GuardLimits:
    """The guard's limits from the settings (an upload's body: the largest file and 1 MB of framing;
    an MCP call: the largest file base64-encoded, 4/3 of its bytes, and 1 MB)."""
    upload = int(s.max_upload_mb * MB)
    return GuardLimits(
        body_bytes=int(s.max_body_kb * 1024),
        live_body_bytes=int(s.live_body_kb * 1024),
        upload_body_bytes=upload + MB,
        mcp_body_bytes=upload * 4 // 3 + MB,
        new_sessions_per_s=s.new_sessions_per_min / 60,
        new_session_burst=s.new_sessions_per_min,
        live_per_s=s.live_per_s,
        upload_bytes_per_s=s.upload_mb_per_min * MB / 60,
        upload_burst_bytes=s.upload_mb_per_min * MB,
        upload_folder_bytes=int(s.temp_mb * MB),
        max_sessions=s.max_sessions,
    )


def middleware(s: Settings) -> list[Middleware]:
    """The guard as Starlette middleware (empty when ATTENTION_GUARD=0)."""
    if not s.guard:
        return []
    folder = Path(get_upload_folder())
    return [
        Middleware(
            Guard,
            limits=guard_limits(s),
            upload_folder=folder,
            housekeeping=lambda: sweep_empty_dirs(folder, min_age=60.0),
            housekeeping_every=SWEEP_EVERY,
        )
    ]


class LaunchKwargs(Mapping):
    """launch()'s keyword arguments: `fixed`, and a fresh `app_kwargs` (the guard) at every read."""

    def __init__(self, settings: Settings, **fixed: Any):
        self._settings, self._fixed = settings, fixed

    def __getitem__(self, key: str) -> Any:
        if key == "app_kwargs":
            return {"middleware": middleware(self._settings)}
        return self._fixed[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._fixed
        yield "app_kwargs"

    def __len__(self) -> int:
        return len(self._fixed) + 1
