"""Every setting of Attention Explorer, read from the environment once, here.

Each limit below bounds what one visitor (or a crowd of them) can make the server hold or do;
docs/settings.md's table lists them with their environment variables. Change a setting by
setting the variable before the process starts (tests may construct `Settings(...)` directly).

    from attention.config import SETTINGS
    SETTINGS.max_tokens          # patch tokens per image
    SETTINGS.budget_gflop("cpu") # compute per forward pass on this device
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from attention.errors import AttentionError

ROOT = Path(__file__).resolve().parent.parent  # the checkout (or the Space's folder)
WEIGHTS_DIR = ROOT / "weights"  # shipped weights: safetensors + json config
EXAMPLES_DIR = ROOT / "examples"  # shipped photos, digits and the 5,000-digit MNIST subset


# PIL refuses to open images over twice its Image.MAX_IMAGE_PIXELS (a decompression-bomb guard); we
# leave that global alone, so our own pixel limit can be at most that.
PIL_MAX_PIXELS = 2 * 89_478_485


class ConfigError(AttentionError, ValueError):
    """An environment variable holds a value that is not accepted. Raised when the settings are read (at
    import, so a bad value stops start-up with a message naming the variable); an ordinary exception, so
    a caller that constructs `Settings.from_env()` itself can catch it."""


def _read(name: str, default: float, kind: type = float, lo: float = 0.0, hi: float = float("inf")) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(
            f"{name}={raw!r} is not accepted; expected a {kind.__name__} >= {lo:g} (default {default:g})."
        ) from None
    if not lo <= value <= hi:
        top = "" if hi == float("inf") else f" and <= {hi:g}"
        raise ConfigError(
            f"{name}={raw!r} is out of range; expected a {kind.__name__} >= {lo:g}{top} (default {default:g})."
        )
    return value


_YES, _NO = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _flag(name: str, default: bool = False) -> bool:
    """An on/off switch: 1/true/yes/on or 0/false/no/off (any case); unset or empty = `default`;
    anything else is refused (a typo must not silently mean off)."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in _YES | _NO:
        return raw in _YES
    raise ConfigError(
        f"{name}={os.environ[name]!r} is not accepted; expected one of 1/true/yes/on or 0/false/no/off "
        f"(default {'on' if default else 'off'})."
    )


def _networks(name: str) -> str:
    """A comma-separated list of IP addresses or networks (10.0.0.0/8), or "*" for any; refused otherwise."""
    import ipaddress

    raw = os.environ.get(name, "").strip()
    for part in filter(None, (p.strip() for p in raw.split(","))):
        if part == "*":
            continue
        try:
            ipaddress.ip_network(part, strict=False)
        except ValueError:
            raise ConfigError(
                f"{name}={raw!r} is not accepted: {part!r} is not an IP address or network; expected a "
                "comma-separated list such as 10.0.0.0/8,127.0.0.1, or * (any), or empty (none: the default)."
            ) from None
    return raw


@dataclass(frozen=True)
class Settings:
    """The process's settings (defaults in brackets; environment variable after the colon)."""

    max_pixels: int = 40_000_000  # decoded pixels per image: ATTENTION_MAX_PIXELS
    max_tokens: int = 16_384  # patch tokens per image: ATTENTION_MAX_TOKENS
    gflop_cpu: float = 1500.0  # estimated compute of one forward pass on a CPU: ATTENTION_MAX_GFLOP_CPU
    gflop_gpu: float = 40_000.0  # ... on a GPU: ATTENTION_MAX_GFLOP_GPU
    state_mb: float = 1024.0  # every visitor's kept passes together, MB: ATTENTION_STATE_MB
    state_ttl: float = 1800.0  # seconds a kept pass lives unused: ATTENTION_STATE_TTL
    state_visitor_mb: float = 256.0  # one visitor's kept passes together, MB: ATTENTION_STATE_VISITOR_MB
    state_address_mb: float = 384.0  # one address's sessions' kept passes together, MB: ATTENTION_STATE_ADDRESS_MB
    state_idle: float = 30.0  # seconds unused after which a visitor keeps only state_idle_mb: ATTENTION_STATE_IDLE
    state_idle_mb: float = 64.0  # an idle visitor's newest passes (and always the newest): ATTENTION_STATE_IDLE_MB
    memory_every: float = 10.0  # seconds between sweeps of the store and of freed memory: ATTENTION_MEMORY_EVERY
    malloc_arenas: int = 2  # glibc malloc arenas of the server (0: glibc's 8 a core): ATTENTION_MALLOC_ARENAS
    # blocks of this many KB or more mapped on their own, unmapped when freed (0: glibc's moving threshold, 128 KB
    # raised by each large free up to 32 MB): ATTENTION_MALLOC_MMAP_KB
    malloc_mmap_kb: int = 1024
    # one visitor's jobs waiting or running in the queue at once: ATTENTION_VISITOR_JOBS. A change and the three
    # panel redraws that follow it are 4; the next change must still get in while they run (so not 3)
    visitor_jobs: int = 6
    # jobs of one client address waiting or running in the queue at once, every session from it together:
    # ATTENTION_ADDRESS_WAITING. A class behind one school's address (30 students pressing run at once, twice)
    # fits; a flooder from one address holds at most this many places, served round-robin with everyone else
    # (docs/admission.md)
    address_waiting: int = 64
    # jobs waiting or running in the queue from every visitor together: ATTENTION_QUEUE_WAITING (four flooding
    # addresses at ATTENTION_ADDRESS_WAITING fill it; each job's request body is at most ATTENTION_MAX_BODY_KB)
    queue_waiting: int = 256
    max_models: int = 3  # models resident at once (least recently used unloaded): ATTENTION_MAX_MODELS
    allow_downloads: bool = False  # visitors may make the server download unlisted models: ATTENTION_ALLOW_DOWNLOADS
    max_sessions: int = 1000  # browser sessions whose state Gradio keeps: ATTENTION_MAX_SESSIONS
    max_upload_mb: float = 20.0  # largest upload: ATTENTION_MAX_UPLOAD_MB
    cache_age: float = 900.0  # seconds a served file is kept before deletion: ATTENTION_FILE_TTL
    max_text_chars: int = 200_000  # characters of one typed matrix, checked before parsing: ATTENTION_MAX_TEXT
    guard: bool = True  # the checks in front of the app (attention.crowd.guard); ATTENTION_GUARD=0 turns them off
    max_body_kb: float = 1024.0  # a body on other routes than uploads, MCP, live: ATTENTION_MAX_BODY_KB
    live_body_kb: float = 16.0  # a live-route call's body: ATTENTION_LIVE_BODY_KB
    new_sessions_per_min: float = 30.0  # new sessions a client opens a minute: ATTENTION_NEW_SESSIONS_PER_MIN
    live_per_s: float = 20.0  # live-route calls of one client a second (bursts of twice that): ATTENTION_LIVE_PER_S
    upload_mb_per_min: float = 120.0  # upload MB of one client a minute (as a burst too): ATTENTION_UPLOAD_MB_PER_MIN
    temp_mb: float = 4096.0  # every file in Gradio's upload/cache folder together, MB: ATTENTION_TEMP_MB
    refusal_delay: float = 1.0  # seconds the guard holds a refusal (400/403/413/429): ATTENTION_REFUSAL_DELAY
    video_max_frames: int = 600  # frames of one attention video: ATTENTION_VIDEO_MAX_FRAMES
    video_gflop_cpu: float = 6000.0  # estimated compute of one attention video on a CPU: ATTENTION_VIDEO_MAX_GFLOP_CPU
    video_gflop_gpu: float = 400_000.0  # ... on a GPU: ATTENTION_VIDEO_MAX_GFLOP_GPU
    video_max_pixels: int = 3840 * 2160  # pixels per video frame (more: scaled down): ATTENTION_VIDEO_MAX_PIXELS
    concurrency: int = 2  # jobs computed at once: ATTENTION_CONCURRENCY
    # admission of computing jobs (attention.crowd.admission): relevance and videos share ATTENTION_HEAVY_SLOTS slots
    # round-robin between client addresses, then between an address's sessions, each address 1 computing; Gradio
    # starts ATTENTION_HEAVY_WAITING more to wait in the lane (a thread each: a video hands its slot to one between
    # chunks), the rest wait in Gradio's queue, served by the same rule (attention.ui.common.fair_queue); each
    # job at most ATTENTION_JOB_SECONDS holding a slot. Two slots: a visitor's short job runs beside another
    # visitor's long one (sharing the cores, at the heavy lane's nice) instead of waiting for it to end
    # (docs/admission.md).
    # ATTENTION_VISITOR_QUEUED: an MCP session's calls waiting in the MCP lane
    heavy_slots: int = 2
    visitor_queued: int = 2
    heavy_waiting: int = 4
    job_seconds: float = 120.0
    # torch's intra-op threads of the thread computing a heavy job (relevance, text relevance, a video) on the
    # CPU: ATTENTION_HEAVY_THREADS (0, the default: as torch has them; 1 on 2 cores did not help the light lane:
    # docs/admission.md)
    heavy_threads: int = 0
    # the nice value (CPU priority, 0..19) of the threads computing heavy jobs on the CPU, below the light lane's
    # forwards at 0: ATTENTION_HEAVY_NICE (0: off; where CUDA is available: off) (docs/admission.md)
    heavy_nice: int = 10
    # MCP tool calls of the light endpoints in progress at once, for every MCP caller together, shared round-robin
    # between callers (each 1 running and ATTENTION_VISITOR_QUEUED waiting): ATTENTION_MCP_SLOTS (docs/admission.md)
    mcp_slots: int = 1
    relevance_gflop_cpu: float = (
        1500.0  # estimated compute of one relevance job on a CPU: ATTENTION_RELEVANCE_MAX_GFLOP_CPU
    )
    relevance_gflop_gpu: float = 40_000.0  # ... on a GPU: ATTENTION_RELEVANCE_MAX_GFLOP_GPU
    # an attention rollout priced over this (GFLOP) is computed in the heavy lane, not in the light handler's worker;
    # one over the relevance budget is refused (attention.vit.serve.rollouts): ATTENTION_ROLLOUT_LIGHT_GFLOP
    rollout_light_gflop: float = 10.0
    video_decode_pixels: int = 36_000_000  # pixels of a decoded frame, canvas included: ATTENTION_VIDEO_DECODE_PIXELS
    video_decode_gpixels: float = (
        20.0  # pixels decoded for one video (all its frames), billions: ATTENTION_VIDEO_DECODE_GPIXELS
    )
    video_decode_seconds: float = 60.0  # seconds of decoding for one video: ATTENTION_VIDEO_DECODE_SECONDS
    video_npz_mb: float = 64.0  # the raw maps (.npz) of one video, MB: ATTENTION_VIDEO_NPZ_MB
    # the client address: X-Forwarded-For entries are taken (right to left) only past these proxies
    # (comma-separated addresses or networks; locally none) or this many hops (on Spaces, 1: the proxy's entry)
    trusted_proxies: str = ""  # ATTENTION_TRUSTED_PROXIES
    proxy_hops: int = 0  # ATTENTION_PROXY_HOPS
    server_name: str = "127.0.0.1"  # GRADIO_SERVER_NAME
    offline: bool = field(default=False)  # ATTENTION_OFFLINE=1: never try to download full MNIST
    mcp: bool = True  # serve the API endpoints as MCP tools at /gradio_api/mcp/: ATTENTION_MCP=0 turns it off
    # the operator's own checkpoint, made the default model (as `python app.py --model PATH --arch NAME`):
    checkpoint: str = ""  # its file: ATTENTION_CHECKPOINT
    checkpoint_arch: str = ""  # its timm architecture: ATTENTION_ARCH
    checkpoint_key: str = ""  # the key its weights sit under (DINO's teacher, ...): ATTENTION_CHECKPOINT_KEY
    checkpoint_family: str = ""  # how images are fed (dino, dinov2, ..., default the arch's): ATTENTION_FAMILY

    def pass_store(self) -> dict[str, float | int]:
        """The pass store's limits as `attention.crowd.cache.SharedCache`'s keyword arguments (bytes, seconds)."""
        mb = 2**20
        return dict(
            max_bytes=int(self.state_mb * mb),
            ttl=self.state_ttl,
            max_owner_bytes=int(self.state_visitor_mb * mb),
            max_group_bytes=int(self.state_address_mb * mb),
            idle=self.state_idle,
            idle_bytes=int(self.state_idle_mb * mb),
        )

    def budget_gflop(self, device: str) -> float:
        """The compute budget (GFLOP per forward pass) on a device type ("cpu", "cuda", ...)."""
        return self.gflop_cpu if str(device).split(":")[0] == "cpu" else self.gflop_gpu

    def relevance_budget_gflop(self, device: str) -> float:
        """The compute budget of one relevance job (GFLOP: forward, backward and the rules' rows) on a device type."""
        return self.relevance_gflop_cpu if str(device).split(":")[0] == "cpu" else self.relevance_gflop_gpu

    def video_budget_gflop(self, device: str) -> float:
        """The compute budget of one attention video (GFLOP, all its frames) on a device type."""
        return self.video_gflop_cpu if str(device).split(":")[0] == "cpu" else self.video_gflop_gpu

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            max_pixels=int(_read("ATTENTION_MAX_PIXELS", cls.max_pixels, int, 1, PIL_MAX_PIXELS)),
            max_tokens=int(_read("ATTENTION_MAX_TOKENS", cls.max_tokens, int, 1)),
            gflop_cpu=_read("ATTENTION_MAX_GFLOP_CPU", cls.gflop_cpu, float, 0.001),
            gflop_gpu=_read("ATTENTION_MAX_GFLOP_GPU", cls.gflop_gpu, float, 0.001),
            state_mb=_read("ATTENTION_STATE_MB", cls.state_mb),
            state_ttl=_read("ATTENTION_STATE_TTL", cls.state_ttl),
            state_visitor_mb=_read("ATTENTION_STATE_VISITOR_MB", cls.state_visitor_mb),
            state_address_mb=_read("ATTENTION_STATE_ADDRESS_MB", cls.state_address_mb),
            state_idle=_read("ATTENTION_STATE_IDLE", cls.state_idle, float, 1),
            state_idle_mb=_read("ATTENTION_STATE_IDLE_MB", cls.state_idle_mb),
            memory_every=_read("ATTENTION_MEMORY_EVERY", cls.memory_every, float, 1),
            malloc_arenas=int(_read("ATTENTION_MALLOC_ARENAS", cls.malloc_arenas, int, 0)),
            malloc_mmap_kb=int(_read("ATTENTION_MALLOC_MMAP_KB", cls.malloc_mmap_kb, int, 0, 32 * 1024)),
            visitor_jobs=int(_read("ATTENTION_VISITOR_JOBS", cls.visitor_jobs, int, 1)),
            address_waiting=int(_read("ATTENTION_ADDRESS_WAITING", cls.address_waiting, int, 1, 100_000)),
            queue_waiting=int(_read("ATTENTION_QUEUE_WAITING", cls.queue_waiting, int, 1, 1_000_000)),
            max_models=int(_read("ATTENTION_MAX_MODELS", cls.max_models, int, 1)),
            allow_downloads=_flag("ATTENTION_ALLOW_DOWNLOADS"),
            max_sessions=int(_read("ATTENTION_MAX_SESSIONS", cls.max_sessions, int, 1)),
            max_upload_mb=_read("ATTENTION_MAX_UPLOAD_MB", cls.max_upload_mb, float, 0.001),
            cache_age=_read("ATTENTION_FILE_TTL", cls.cache_age, float, 1),
            max_text_chars=int(_read("ATTENTION_MAX_TEXT", cls.max_text_chars, int, 1)),
            guard=_flag("ATTENTION_GUARD", default=True),
            max_body_kb=_read("ATTENTION_MAX_BODY_KB", cls.max_body_kb, float, 1),
            live_body_kb=_read("ATTENTION_LIVE_BODY_KB", cls.live_body_kb, float, 1),
            new_sessions_per_min=_read("ATTENTION_NEW_SESSIONS_PER_MIN", cls.new_sessions_per_min, float, 1),
            live_per_s=_read("ATTENTION_LIVE_PER_S", cls.live_per_s, float, 0.1),
            upload_mb_per_min=_read("ATTENTION_UPLOAD_MB_PER_MIN", cls.upload_mb_per_min, float, 1),
            temp_mb=_read("ATTENTION_TEMP_MB", cls.temp_mb, float, 1),
            refusal_delay=_read("ATTENTION_REFUSAL_DELAY", cls.refusal_delay, float, 0, 10),
            video_max_frames=int(_read("ATTENTION_VIDEO_MAX_FRAMES", cls.video_max_frames, int, 1)),
            video_gflop_cpu=_read("ATTENTION_VIDEO_MAX_GFLOP_CPU", cls.video_gflop_cpu, float, 0.001),
            video_gflop_gpu=_read("ATTENTION_VIDEO_MAX_GFLOP_GPU", cls.video_gflop_gpu, float, 0.001),
            video_max_pixels=int(_read("ATTENTION_VIDEO_MAX_PIXELS", cls.video_max_pixels, int, 1, PIL_MAX_PIXELS)),
            concurrency=int(_read("ATTENTION_CONCURRENCY", cls.concurrency, int, 1)),
            heavy_slots=int(_read("ATTENTION_HEAVY_SLOTS", cls.heavy_slots, int, 1, 64)),
            visitor_queued=int(_read("ATTENTION_VISITOR_QUEUED", cls.visitor_queued, int, 0, 64)),
            heavy_waiting=int(_read("ATTENTION_HEAVY_WAITING", cls.heavy_waiting, int, 0, 1024)),
            job_seconds=_read("ATTENTION_JOB_SECONDS", cls.job_seconds, float, 1),
            heavy_threads=int(_read("ATTENTION_HEAVY_THREADS", cls.heavy_threads, int, 0, 1024)),
            heavy_nice=int(_read("ATTENTION_HEAVY_NICE", cls.heavy_nice, int, 0, 19)),
            mcp_slots=int(_read("ATTENTION_MCP_SLOTS", cls.mcp_slots, int, 1, 64)),
            relevance_gflop_cpu=_read("ATTENTION_RELEVANCE_MAX_GFLOP_CPU", cls.relevance_gflop_cpu, float, 0.001),
            relevance_gflop_gpu=_read("ATTENTION_RELEVANCE_MAX_GFLOP_GPU", cls.relevance_gflop_gpu, float, 0.001),
            rollout_light_gflop=_read("ATTENTION_ROLLOUT_LIGHT_GFLOP", cls.rollout_light_gflop, float, 0),
            video_decode_pixels=int(_read("ATTENTION_VIDEO_DECODE_PIXELS", cls.video_decode_pixels, int, 1)),
            video_decode_gpixels=_read("ATTENTION_VIDEO_DECODE_GPIXELS", cls.video_decode_gpixels, float, 0.001),
            video_decode_seconds=_read("ATTENTION_VIDEO_DECODE_SECONDS", cls.video_decode_seconds, float, 0.1),
            video_npz_mb=_read("ATTENTION_VIDEO_NPZ_MB", cls.video_npz_mb, float, 0.001),
            trusted_proxies=_networks("ATTENTION_TRUSTED_PROXIES"),
            proxy_hops=int(_read("ATTENTION_PROXY_HOPS", cls.proxy_hops, int, 0, 16)),
            server_name=os.environ.get("GRADIO_SERVER_NAME", cls.server_name).strip() or cls.server_name,
            offline=_flag("ATTENTION_OFFLINE"),
            mcp=_flag("ATTENTION_MCP", default=True),
            checkpoint=os.environ.get("ATTENTION_CHECKPOINT", "").strip(),
            checkpoint_arch=os.environ.get("ATTENTION_ARCH", "").strip(),
            checkpoint_key=os.environ.get("ATTENTION_CHECKPOINT_KEY", "").strip(),
            checkpoint_family=os.environ.get("ATTENTION_FAMILY", "").strip(),
        )


SETTINGS = Settings.from_env()
