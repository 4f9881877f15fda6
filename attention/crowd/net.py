"""Is the network there? Answered at once when told offline, else by one short connect.

The app must never hang on a network time-out (offline Spaces, air-gapped machines, CI):
every download path asks `reachable` first, which costs at most `timeout` seconds and is
remembered for REMEMBER seconds per host.
"""

from __future__ import annotations

import socket
import threading

from cachetools import TTLCache

from attention.config import SETTINGS, Settings

REMEMBER = 60.0  # seconds an answer is kept
# (host, port) -> answer, the oldest out past 16: the hosts are the code's own (the Hub, MNIST's mirror)
_seen: TTLCache[tuple[str, int], bool] = TTLCache(maxsize=16, ttl=REMEMBER)
_lock = threading.Lock()  # cachetools' caches are not thread-safe


def offline(settings: Settings | None = None) -> bool:
    """True when told to touch no network: ATTENTION_OFFLINE=1 (`settings`, default the process's, read
    once in attention.config) or HF_HUB_OFFLINE=1 (as huggingface-hub itself read it)."""
    from huggingface_hub import constants

    return (settings or SETTINGS).offline or bool(constants.HF_HUB_OFFLINE)


def reachable(host: str, port: int = 443, *, timeout: float = 1.5) -> bool:
    """Whether a TCP connection to (host, port) opens within `timeout` s; remembered for REMEMBER s."""
    key = (host, port)
    with _lock:
        known = _seen.get(key)
    if known is not None:
        return known
    try:
        socket.create_connection(key, timeout=timeout).close()
        ok = True
    except OSError:
        ok = False
    with _lock:
        _seen[key] = ok
    return ok


def forget() -> None:
    """Drop every remembered answer (tests; after the network changed)."""
    with _lock:
        _seen.clear()
