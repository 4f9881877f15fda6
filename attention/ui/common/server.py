"""What `launch()` is given besides the Blocks: the guard in front of Gradio's app (`attention.crowd.guard`),
Gradio's queue served round-robin by client address, then session (`attention.ui.common.fair_queue`),
the MCP lane around its MCP server's tool calls (`attention.ui.common.admit.gate_mcp_calls`, installed by a lifespan),
the sweep of the folders Gradio's cache deletion leaves and of the `data:` files its MCP server writes;
and the serving process's upkeep of its memory (`memory_upkeep`): few malloc arenas, the stores' clocks
applied, freed memory handed back.

`launch_kwargs(...)` is a mapping whose `app_kwargs` is built anew at each read: Gradio writes into the
`app_kwargs` dict it is given (its lifespan, which holds that launch's MCP server), so one dict shared
by two launches in a process (tests) would start the first launch's server again in the second. Gradio
runs our lifespan (`gate_mcp`) inside its own, after it made that launch's MCP server.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.utils import get_upload_folder
from starlette.middleware import Middleware

from attention.config import Settings
from attention.crowd.cache import sweep, sweep_empty_dirs
from attention.crowd.clients import Proxies
from attention.crowd.guard import Guard
from attention.crowd.limits import GuardLimits
from attention.crowd.memory import Janitor, at_most_every, fix_mmap_threshold, limit_arenas
from attention.ui.common.admit import gate_mcp_calls
from attention.ui.common.components import pending_jobs
from attention.ui.common.cpu_share import share_cpu
from attention.ui.common.fair_queue import fair_queue
from attention.vit.relevance.service import RESULTS
from attention.vit.serve.passes import PASSES

MB = 1 << 20
MCP_COPIES = "mcp-data"  # the upload folder's subfolder where Gradio's MCP server writes each `data:` file
MCP_COPY_AGE = 30.0  # seconds one is kept there: Gradio's loopback upload of it (the copy the job reads) is at once
FILE_TYPES = (gr.Image, gr.ImageEditor, gr.File, gr.Video, gr.Audio, gr.Gallery, gr.Model3D)  # values: file objects
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
        # past the burst, a new session waits for its token (paced, not refused) while an address's room of
        # sessions waiting (ATTENTION_ADDRESS_WAITING of them, at the rate) is not full
        new_session_wait=s.address_waiting / (s.new_sessions_per_min / 60),
        new_session_pace=4 * s.new_sessions_per_min / 60,  # a burst spread at 4x the rate (2 a second by default)
        live_per_s=s.live_per_s,
        upload_bytes_per_s=s.upload_mb_per_min * MB / 60,
        upload_burst_bytes=s.upload_mb_per_min * MB,
        upload_folder_bytes=int(s.temp_mb * MB),
        max_sessions=s.max_sessions,
        refusal_delay=s.refusal_delay,
    )


FILE_ACCEPTED = (
    "a file uploaded to this server first: gradio_client's handle_file('photo.png') uploads a local file; "
    'over HTTP, POST it to /gradio_api/upload, then send {"path": <the path it answers>, "meta": '
    '{"_type": "gradio.FileData"}}. A path or URL on its own is not read (download a picture from the web first)'
)


class FileInputs:
    """Which inputs of each event take a file (images, sketches, videos), to refuse a path or URL sent in
    their place before Gradio reads it: a server path outside the upload folder (Gradio refuses it too, but
    its answer names nothing: an `{"error": null}`, or gradio_client's "has not enabled verbose error
    reporting"), and a URL (http(s)://, data:, whatever the value's `url` says), which Gradio's
    downloader would fetch with no size cap."""

    def __init__(self, blocks: gr.Blocks, folder: Path):
        self.folder = folder.resolve()
        self.by_id = {
            fn._id: [(i, b.label or f"input {i}") for i, b in enumerate(fn.inputs) if isinstance(b, FILE_TYPES)]
            for fn in blocks.fns.values()
        }
        self.by_name = {fn.api_name: fn._id for fn in blocks.fns.values() if fn.api_name}
        self.n_inputs = {fn._id: len(fn.inputs) for fn in blocks.fns.values()}

    def __call__(self, path: str, body: dict) -> tuple[str, list[dict]] | None:
        """None if every file input of the called event holds an uploaded file (or nothing); else
        (message, Gradio's validation detail: gradio_client raises it as a ValidationError)."""
        name = path.rstrip("/").rsplit("/", 1)[-1]
        fn = body.get("fn_index") if path.endswith("/queue/join") else self.by_name.get(name)
        data = body.get("data")
        if fn not in self.by_id or not isinstance(data, list):
            return None
        for i, label in self.by_id[fn]:
            if i < len(data) and not self._uploaded(data[i]):
                message = f"{label!r} is not a file uploaded to this server; accepted: {FILE_ACCEPTED}."
                detail = [{"__type__": "validate", "is_valid": False, "parameter_name": label, "message": message}]
                return message, detail
        if len(data) < self.n_inputs[fn]:  # Gradio's own refusal would echo every value sent, in the answer and log
            message = (
                f"This call sends {len(data)} values; this endpoint takes {self.n_inputs[fn]} (one per input, in "
                "order: gradio_client fills the defaults)."
            )
            return message, [{"__type__": "validate", "is_valid": False, "parameter_name": "data", "message": message}]
        return None

    def _uploaded(self, value: Any) -> bool:
        """None, or file objects (at any depth: a sketch holds several) all inside the upload folder."""
        if value is None:
            return True
        if isinstance(value, list):
            return all(self._uploaded(v) for v in value)
        if not isinstance(value, dict):
            return False
        if (
            "path" in value or "url" in value
        ):  # the path is what Gradio reads (or downloads, for a URL), whatever the url
            where = value.get("path")
            if not isinstance(where, str) or "://" in where or where.startswith("data:"):
                return False
            return Path(where).resolve().is_relative_to(self.folder)
        return all(self._uploaded(v) for k, v in value.items() if k not in ("meta", "id"))


def middleware(s: Settings, blocks: gr.Blocks | None = None) -> list[Middleware]:
    """The guard as Starlette middleware (empty when ATTENTION_GUARD=0)."""
    if not s.guard:
        return []
    folder = Path(get_upload_folder())
    return [
        Middleware(
            Guard,
            limits=guard_limits(s),
            upload_folder=folder,
            check_json=None if blocks is None else FileInputs(blocks, folder),
            proxies=Proxies.parse(s.trusted_proxies, s.proxy_hops),
        )
    ]


def route_mcp_copies(folder: Path) -> Path:
    """Send the files Gradio's MCP server writes for `data:` values (`gradio.mcp.DEFAULT_TEMP_DIR`, read at each
    call) to `folder`/MCP_COPIES: Gradio writes each there before its guarded loopback upload (which makes
    the tracked copy the job reads) and never deletes it; there `sweep_mcp_copies` does. The folder is
    inside the upload folder, so the guard's total (ATTENTION_TEMP_MB) counts it; the MCP body was charged
    to its caller's upload bytes (ATTENTION_UPLOAD_MB_PER_MIN) before Gradio read it. RuntimeError (at
    start-up) if Gradio no longer has that setting."""
    import gradio.mcp

    if not isinstance(getattr(gradio.mcp, "DEFAULT_TEMP_DIR", None), str):
        raise RuntimeError(
            f"gradio {gr.__version__} has no gradio.mcp.DEFAULT_TEMP_DIR (where its MCP server writes data: "
            "files); attention.ui.common.server.route_mcp_copies needs another way to bound them."
        )
    gradio.mcp.DEFAULT_TEMP_DIR = str(folder / MCP_COPIES)
    return folder / MCP_COPIES


def sweep_mcp_copies(folder: Path, max_age: float = MCP_COPY_AGE) -> None:
    """Delete the MCP `data:` files in `folder`/MCP_COPIES older than `max_age` seconds (`cache.sweep`)."""
    if (folder / MCP_COPIES).is_dir():
        sweep(folder / MCP_COPIES, max_age, every=0.0)


def memory_upkeep(s: Settings) -> Janitor:
    """For the serving process, before it starts serving: at most `s.malloc_arenas` malloc arenas
    (`attention.crowd.memory.limit_arenas`; 0 leaves glibc's own), blocks of `s.malloc_mmap_kb` KB or more
    mapped on their own (`fix_mmap_threshold`; 0 leaves glibc's moving threshold), and a started janitor that every
    `s.memory_every` seconds applies the pass store's and the relevance results' time to live and idle
    rule (a quiet server forgets too), collects cyclic garbage (a traceback keeps a job's frames alive until then),
    then returns freed memory to the system (`attention.crowd.memory.release`);
    every SWEEP_EVERY seconds it also removes the empty folders Gradio's cache deletion leaves in the
    upload folder (`attention.crowd.cache.sweep_empty_dirs`); every MCP_COPY_AGE / 2 seconds it deletes
    the MCP `data:` files older than MCP_COPY_AGE (`sweep_mcp_copies`)."""
    if s.malloc_arenas:
        limit_arenas(s.malloc_arenas)
    if s.malloc_mmap_kb:
        fix_mmap_threshold(s.malloc_mmap_kb * 1024)
    folder = Path(get_upload_folder())
    empty_dirs = at_most_every(SWEEP_EVERY, lambda: sweep_empty_dirs(folder, min_age=60.0))
    mcp_copies = at_most_every(MCP_COPY_AGE / 2, lambda: sweep_mcp_copies(folder))
    return Janitor(s.memory_every, [PASSES.sweep, RESULTS.sweep, empty_dirs, mcp_copies], collect=True).start()


def gate_mcp(blocks: gr.Blocks) -> Callable[[Any], contextlib.AbstractAsyncContextManager[None]]:
    """A lifespan (`app_kwargs`) that puts the MCP tool calls of `blocks`' launch in the MCP lane
    (`attention.ui.common.admit.gate_mcp_calls`) before the app serves; nothing when it serves no MCP."""

    @contextlib.asynccontextmanager
    async def lifespan(app) -> AsyncIterator[None]:
        if getattr(blocks, "mcp_server_obj", None) is not None:
            gate_mcp_calls(blocks.mcp_server_obj)
        yield

    return lifespan


def check_mcp_gate(blocks: gr.Blocks) -> None:
    """RuntimeError now (at start-up) if Gradio's MCP server no longer has what `gate_mcp_calls` wraps: tried on
    a server of `blocks` made for the check (a failure in the lifespan would only show as Gradio's port search)."""
    import gradio.mcp

    with warnings.catch_warnings():  # what it warns of, the launch's own server warns of again
        warnings.simplefilter("ignore")
        gate_mcp_calls(gradio.mcp.GradioMCPServer(blocks))


class LaunchKwargs(Mapping):
    """launch()'s keyword arguments: `fixed`, and a fresh `app_kwargs` (the guard, the MCP lane) at every read."""

    def __init__(self, settings: Settings, blocks: gr.Blocks, **fixed: Any):
        pending_jobs(blocks)  # Gradio's count of a visitor's queued jobs is there (else RuntimeError, at start-up)
        fair_queue(blocks)  # Gradio's queue served round-robin by address, then session (else RuntimeError)
        share_cpu(blocks)  # a crowded address's light jobs compute at the heavy jobs' nice
        route_mcp_copies(Path(get_upload_folder()))  # MCP data: files where the janitor sweeps them
        if fixed.get("mcp_server"):
            check_mcp_gate(blocks)  # the MCP lane can hold the tool calls (else RuntimeError, at start-up)
        self._settings, self._blocks, self._fixed = settings, blocks, fixed

    def __getitem__(self, key: str) -> Any:
        if key == "app_kwargs":
            # uvicorn would take X-Forwarded-For from loopback peers (FORWARDED_ALLOW_IPS, read when Gradio starts
            # it): it trusts none, so that the guard alone resolves the client (ATTENTION_TRUSTED_PROXIES, _HOPS)
            os.environ["FORWARDED_ALLOW_IPS"] = ""
            fair_queue(self._blocks)  # again, on the queue this launch serves (`blocks.queue()` makes a new one)
            kwargs = {"middleware": middleware(self._settings, self._blocks)}
            if self._fixed.get("mcp_server"):
                kwargs["lifespan"] = gate_mcp(self._blocks)  # the MCP lane around its tool calls
            return kwargs
        return self._fixed[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._fixed
        yield "app_kwargs"

    def __len__(self) -> int:
        return len(self._fixed) + 1
