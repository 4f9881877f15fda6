"""Who a request comes from: the client address through trusted proxy hops only, and the signed
header that carries an MCP caller's identity through Gradio's loopback call.

A visitor can write any X-Forwarded-For they like; a proxy appends the address it saw on the right.
So the entries are read right to left, and only as far as the operator trusts: past each proxy named
in `trusted` (addresses or networks), or `hops` entries (on a Space, 1: its proxy's entry). Locally,
with neither, the header is ignored and the peer address is the client.

    Proxies.parse("10.0.0.0/8", hops=0).client("10.1.2.3", b"6.6.6.6, 1.2.3.4")   # -> "1.2.3.4"
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass

VISITOR_HEADER = "x-attention-visitor"  # "<client> <mcp session> <signature>", set by the guard on MCP calls
_KEY = secrets.token_bytes(32)  # this process's signing key: a header signed here can only come from here


@dataclass(frozen=True)
class Proxies:
    """The proxies whose X-Forwarded-For entries are believed: `networks` (None: any) and `hops`."""

    networks: tuple | None = ()
    hops: int = 0

    @classmethod
    def parse(cls, spec: str, hops: int = 0) -> Proxies:
        """From ATTENTION_TRUSTED_PROXIES (comma-separated addresses or networks, "*": any) and ATTENTION_PROXY_HOPS."""
        parts = [p.strip() for p in (spec or "").split(",") if p.strip()]
        if "*" in parts:
            return cls(None, hops)
        return cls(tuple(ipaddress.ip_network(p, strict=False) for p in parts), hops)

    def trusted(self, address: str) -> bool:
        if self.networks is None:
            return True
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in n for n in self.networks)

    def client(self, peer: str, forwarded: bytes | str | None) -> str:
        """The client address: `peer`, then X-Forwarded-For's entries right to left while the address so far
        is a trusted proxy or hops remain. An entry that is not an IP address stops the walk (the one before it
        is kept)."""
        raw = forwarded.decode("latin-1") if isinstance(forwarded, bytes) else forwarded or ""
        entries = [e.strip() for e in raw.split(",") if e.strip()]
        addr, hops = peer, self.hops
        while entries and (hops > 0 or self.trusted(addr)):
            entry = entries.pop()
            try:
                ipaddress.ip_address(entry)
            except ValueError:
                break
            addr, hops = entry, hops - 1
        return addr


def sign(client: str, session: str) -> str:
    """The VISITOR_HEADER value for an MCP caller at `client` with MCP session `session`."""
    body = f"{client} {session}"
    return f"{body} {hmac.new(_KEY, body.encode(), hashlib.sha256).hexdigest()[:32]}"


def verify(value: str) -> tuple[str, str] | None:
    """(client, session) of a VISITOR_HEADER value signed by this process, else None."""
    body, _, mac = value.rpartition(" ")
    good = hmac.new(_KEY, body.encode(), hashlib.sha256).hexdigest()[:32]
    if not body or not hmac.compare_digest(mac, good):
        return None
    client, _, session = body.partition(" ")
    return client, session
