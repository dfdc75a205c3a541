"""The rules of webhook delivery that need no I/O: which URLs and addresses are allowed, the
retry schedule, the signature, secrets. The server, the CLI and the tests share them.

The schedule is PIRCAN v0.1 section 4: the first try when the event is queued, then retries
1 minute after the first failure, doubling, at most 6 hours apart, 12 tries in all; a delivery
not made within 3 days of being queued, or whose 12th try failed, becomes a dead letter.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "EXPIRY_MS",
    "FIRST_RETRY_MS",
    "MAX_RETRY_MS",
    "MAX_TRIES",
    "SECRET_GRACE_MS",
    "URL_MAX",
    "Target",
    "address_refusal",
    "networks",
    "new_secret",
    "next_try_at",
    "parse_url",
    "retry_delay_ms",
    "sign",
    "signature_header",
]

MAX_TRIES = 12
FIRST_RETRY_MS = 60_000
MAX_RETRY_MS = 6 * 3_600_000
EXPIRY_MS = 3 * 86_400_000
# after ROTATE, deliveries are signed with the old secret too for this long (receivers switch over)
SECRET_GRACE_MS = 86_400_000
URL_MAX = 2000
SECRET_PREFIX = "whsec_"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Target:
    """A webhook URL taken apart: what is resolved and connected to, and what the request names."""

    url: str
    scheme: str
    host: str  # without brackets for IPv6
    port: int


def parse_url(text: str) -> Target | str:
    """The URL as a ``Target``, or why it cannot be a webhook URL: absolute http or https, a
    host, no user name or password, no fragment, no spaces or control characters."""
    if not text or len(text) > URL_MAX:
        return f"A webhook URL is 1 to {URL_MAX} characters"
    if any(c <= " " or c == "\x7f" for c in text) or not text.isascii():
        return "A webhook URL has no spaces, control characters or non-ASCII characters (use IDNA and %-escapes)"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return "Not a valid URL"
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        return "A webhook URL starts with http:// or https://"
    host = (parts.hostname or "").lower()
    if not host:
        return "A webhook URL names a host"
    if parts.username is not None or parts.password is not None:
        return "A webhook URL carries no user name or password (use the signature to check the origin)"
    if parts.fragment or text.endswith("#"):
        return "A webhook URL has no fragment (#...)"
    if port == 0:
        return "Not a valid port"
    return Target(text, scheme, host, port or (443 if scheme == "https" else 80))


def networks(cidrs: list[str]) -> list[Network]:
    """The allowed networks of ``pircan.webhook_allowed_networks`` (validated by the config model)."""
    return [ipaddress.ip_network(c, strict=False) for c in cidrs]


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, 6to4, Teredo client, NAT64), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def address_refusal(ip: IPAddress, allowed: list[Network]) -> str | None:
    """Why the server may not connect to ``ip`` (a word: loopback, private, ...), or None.
    Only public unicast addresses are allowed, unless ``allowed`` names the address's network."""
    if any(ip.version == net.version and ip in net for net in allowed):
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None:
            return address_refusal(inner, allowed)
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if ip.is_unspecified or ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "not public"
    return None


def retry_delay_ms(tries: int) -> int:
    """The wait after the ``tries``-th failed try: 1 minute after the first, doubling, at most 6 hours."""
    return min(FIRST_RETRY_MS << min(tries - 1, 20), MAX_RETRY_MS)


def next_try_at(tries: int, now: int, queued_at: int) -> int | None:
    """When to try again after the ``tries``-th failure at ``now``; None: no more tries (a dead
    letter). A retry that would fall after the 3 days is due at their end (and then dead)."""
    if tries >= MAX_TRIES:
        return None
    return min(now + retry_delay_ms(tries), queued_at + EXPIRY_MS)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """HMAC-SHA256 over ``<timestamp>.<body>`` with the secret's UTF-8 bytes, in lowercase hex."""
    return hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def signature_header(secrets_in_use: list[str], timestamp: str, body: bytes) -> str:
    """``PIRCAN-Signature``: ``v1=<hex>`` for each secret in use (the current one first)."""
    return ",".join("v1=" + sign(s, timestamp, body) for s in secrets_in_use)


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)
