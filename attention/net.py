"""Is the network there? Answered at once when told offline, else by one short connect.

The app must never hang on a network time-out (offline Spaces, air-gapped machines, CI):
every download path asks `reachable` first, which costs at most `timeout` seconds and is
remembered for `ttl` seconds per host.
"""

from __future__ import annotations

import socket
import time

from attention.config import SETTINGS, Settings

_seen: dict[tuple[str, int], tuple[float, bool]] = {}  # (host, port) -> (when, answer)


def offline(settings: Settings | None = None) -> bool:
    """True when told to touch no network: ATTENTION_OFFLINE=1 (`settings`, default the process's, read
    once in attention.config) or HF_HUB_OFFLINE=1 (as huggingface-hub itself read it)."""
    from huggingface_hub import constants

    return (settings or SETTINGS).offline or bool(constants.HF_HUB_OFFLINE)


def reachable(host: str, port: int = 443, *, timeout: float = 1.5, ttl: float = 60.0) -> bool:
    """Whether a TCP connection to (host, port) opens within `timeout` s; remembered for `ttl` s."""
    key, now = (host, port), time.monotonic()
    if key in _seen and now - _seen[key][0] < ttl:
        return _seen[key][1]
    try:
        socket.create_connection(key, timeout=timeout).close()
        ok = True
    except OSError:
        ok = False
    _seen[key] = (now, ok)
    return ok


def forget() -> None:
    """Drop every remembered answer (tests; after the network changed)."""
    _seen.clear()
