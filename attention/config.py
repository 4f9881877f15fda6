"""Every setting of Attention Explorer, read from the environment once, here.

Each limit below bounds what one visitor (or a crowd of them) can make the server hold or do;
README's "Limits" table lists them with their environment variables. Change a setting by
setting the variable before the process starts (tests may construct `Settings(...)` directly).

    from attention.config import SETTINGS
    SETTINGS.max_tokens          # patch tokens per image
    SETTINGS.budget_gflop("cpu") # compute per forward pass on this device
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout (or the Space's folder)
WEIGHTS_DIR = ROOT / "weights"  # shipped weights: safetensors + json config
EXAMPLES_DIR = ROOT / "examples"  # shipped photos, digits and the 5,000-digit MNIST subset


# PIL refuses to open images over twice its Image.MAX_IMAGE_PIXELS (a decompression-bomb guard); we
# leave that global alone, so our own pixel limit can be at most that.
PIL_MAX_PIXELS = 2 * 89_478_485


class ConfigError(SystemExit):
    """An environment variable holds a value that is not accepted (stops the process at start-up)."""


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


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Settings:
    """The process's settings (defaults in brackets; environment variable after the colon)."""

    max_pixels: int = 40_000_000  # decoded pixels per image: ATTENTION_MAX_PIXELS
    max_tokens: int = 16_384  # patch tokens per image: ATTENTION_MAX_TOKENS
    gflop_cpu: float = 1500.0  # estimated compute of one forward pass on a CPU: ATTENTION_MAX_GFLOP_CPU
    gflop_gpu: float = 40_000.0  # ... on a GPU: ATTENTION_MAX_GFLOP_GPU
    state_mb: float = 1024.0  # every visitor's kept passes together, MB: ATTENTION_STATE_MB
    state_ttl: float = 1800.0  # seconds a kept pass lives unused: ATTENTION_STATE_TTL
    max_models: int = 3  # models resident at once (least recently used unloaded): ATTENTION_MAX_MODELS
    allow_downloads: bool = False  # visitors may make the server download unlisted models: ATTENTION_ALLOW_DOWNLOADS
    max_sessions: int = 1000  # browser sessions whose state Gradio keeps: ATTENTION_MAX_SESSIONS
    max_upload_mb: float = 20.0  # largest upload: ATTENTION_MAX_UPLOAD_MB
    cache_age: float = 900.0  # seconds a served file is kept before deletion: ATTENTION_FILE_TTL
    max_text_chars: int = 200_000  # characters of one typed matrix, checked before parsing: ATTENTION_MAX_TEXT
    video_max_frames: int = 600  # frames of one attention video: ATTENTION_VIDEO_MAX_FRAMES
    video_gflop_cpu: float = 6000.0  # estimated compute of one attention video on a CPU: ATTENTION_VIDEO_MAX_GFLOP_CPU
    video_gflop_gpu: float = 400_000.0  # ... on a GPU: ATTENTION_VIDEO_MAX_GFLOP_GPU
    video_max_pixels: int = 3840 * 2160  # pixels per video frame (more: scaled down): ATTENTION_VIDEO_MAX_PIXELS
    queue_poll: float = 0.01  # seconds between the queue's looks for jobs: ATTENTION_QUEUE_POLL
    concurrency: int = 2  # jobs computed at once: ATTENTION_CONCURRENCY
    server_name: str = "127.0.0.1"  # GRADIO_SERVER_NAME
    offline: bool = field(default=False)  # ATTENTION_OFFLINE=1: never try to download full MNIST
    mcp: bool = True  # serve the API endpoints as MCP tools at /gradio_api/mcp/: ATTENTION_MCP=0 turns it off

    def budget_gflop(self, device: str) -> float:
        """The compute budget (GFLOP per forward pass) on a device type ("cpu", "cuda", ...)."""
        return self.gflop_cpu if str(device).split(":")[0] == "cpu" else self.gflop_gpu

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
            max_models=int(_read("ATTENTION_MAX_MODELS", cls.max_models, int, 1)),
            allow_downloads=_flag("ATTENTION_ALLOW_DOWNLOADS"),
            max_sessions=int(_read("ATTENTION_MAX_SESSIONS", cls.max_sessions, int, 1)),
            max_upload_mb=_read("ATTENTION_MAX_UPLOAD_MB", cls.max_upload_mb, float, 0.001),
            cache_age=_read("ATTENTION_FILE_TTL", cls.cache_age, float, 1),
            max_text_chars=int(_read("ATTENTION_MAX_TEXT", cls.max_text_chars, int, 1)),
            video_max_frames=int(_read("ATTENTION_VIDEO_MAX_FRAMES", cls.video_max_frames, int, 1)),
            video_gflop_cpu=_read("ATTENTION_VIDEO_MAX_GFLOP_CPU", cls.video_gflop_cpu, float, 0.001),
            video_gflop_gpu=_read("ATTENTION_VIDEO_MAX_GFLOP_GPU", cls.video_gflop_gpu, float, 0.001),
            video_max_pixels=int(_read("ATTENTION_VIDEO_MAX_PIXELS", cls.video_max_pixels, int, 1, PIL_MAX_PIXELS)),
            queue_poll=_read("ATTENTION_QUEUE_POLL", cls.queue_poll, float, 0.0),
            concurrency=int(_read("ATTENTION_CONCURRENCY", cls.concurrency, int, 1)),
            server_name=os.environ.get("GRADIO_SERVER_NAME", cls.server_name).strip() or cls.server_name,
            offline=_flag("ATTENTION_OFFLINE"),
            mcp=os.environ.get("ATTENTION_MCP", "1").strip().lower() not in {"0", "false", "no", "off"},
        )


SETTINGS = Settings.from_env()
