"""Address sets: loopback and the configured networks (``http.trusted_proxies``)."""

from __future__ import annotations

import ipaddress
from typing import Any

__all__ = ["in_networks", "is_loopback", "networks"]


def networks(items: list[str]) -> list[Any]:
    return [ipaddress.ip_network(item, strict=False) for item in items]


def in_networks(ip: str, nets: list[Any]) -> bool:
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in nets)


_LOOPBACK = networks(["127.0.0.0/8", "::1/128"])


def is_loopback(ip: str) -> bool:
    """127.0.0.0/8 or ::1 (an IPv4-mapped IPv6 address counts as its IPv4 address)."""
    return in_networks(ip, _LOOPBACK)
