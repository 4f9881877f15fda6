"""Is the network there? Answered at once when told offline, else by one short connect.

The app must never hang on a network time-out (offline Spaces, air-gapped machines, CI):
every download path asks `reachable` first, which costs at most `timeout` seconds and is
remembered for `ttl` seconds per host.
"""

from __future__ import annotations

import os
import socket
import time

_seen: dict[tuple[str, int], tuple[float, bool]] = {}  # (host, port) -> (when, answer)


def offline() -> bool:
    """True when ATTENTION_OFFLINE or HF_HUB_OFFLINE is 1/true/yes/on: touch no network."""
    return any(os.environ.get(v, "").strip().lower() in {"1", "true", "yes", "on"}
               for v in ("ATTENTION_OFFLINE", "HF_HUB_OFFLINE"))


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
