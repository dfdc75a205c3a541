"""Which new connections the server takes: the client limit, per-IP limits and the throttle.

A connection accepted and not yet a client (a TLS handshake, mostly) holds a place
(``reserve``) that counts against ``max_per_ip`` and ``max_clients`` like a client does,
until it becomes one or goes away (``release``). No I/O here: refusals are returned
as the ``ERROR`` line the transport sends.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
from collections import deque
from typing import Callable, Final

from ircd.config import Config
from ircd.proto.lines import format_line
from ircd.timers import forget_idle

__all__ = ["Admission", "FULL"]

FULL: Final = "Server is full"
_FULL_LOG_EVERY = 60.0  # seconds between two "Server is full" log lines

log = logging.getLogger("pircd")


@functools.lru_cache(maxsize=4096)  # asked at every connection, mostly for the same few addresses
def _is_loopback(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return ip in ("", "unix")


class Admission:
    # the connection limits in force (``_limits``)
    max_clients: int
    exempt_loopback: bool
    max_per_ip: int
    throttle_window: float
    throttle_count: int

    def __init__(self, config: Config, clock: Callable[[], float], clients: Callable[[], int]) -> None:
        self.config = config
        self.clock = clock
        self._clients = clients  # how many clients there are now
        self.ip_counts: dict[str, int] = {}  # clients per IP
        # connections accepted but not yet clients: per IP, and in all
        self.handshakes: dict[str, int] = {}
        self.handshaking = 0
        self.throttle: dict[str, deque[float]] = {}
        # the most clients the process's open-file limit allows (set by ircd.net at start-up)
        self.fd_client_cap: int | None = None
        self._limits(config)
        self.accepted = 0
        self.refused: dict[str, int] = {}  # connections refused at accept, by reason
        self._full_since = 0.0  # "Server is full" is logged once per _FULL_LOG_EVERY
        self._full_refused = 0

    def configure(self, config: Config) -> None:
        self.config = config
        self._limits(config)
        if self.fd_client_cap is not None and self.fd_client_cap < self.max_clients:
            self.max_clients = self.fd_client_cap

    def _limits(self, config: Config) -> None:
        # read for every connection: plain attributes, not reads through the config's models
        limits = config.connections
        self.max_clients = limits.max_clients
        self.exempt_loopback = limits.exempt_loopback
        self.max_per_ip = limits.max_per_ip
        self.throttle_window = limits.throttle_window
        self.throttle_count = limits.throttle_count

    def cap_clients(self, most: int) -> int:
        """The open-file limit lets the process serve at most ``most`` clients: ``max_clients``
        stays at or below it, across rehashes too. Returns the limit now in force."""
        self.fd_client_cap = max(1, most)
        self.max_clients = min(self.config.connections.max_clients, self.fd_client_cap)
        return self.max_clients

    def prune_throttle(self, now: float) -> int:
        """Forget the IPs with no connection inside the throttle window (the
        record of every address that ever connected would otherwise stay);
        returns how many were dropped."""
        return forget_idle(self.throttle, now - self.config.connections.throttle_window)

    def refusal(self, ip: str) -> str | None:
        """Why a new connection from ``ip`` is refused, or None. Connections accepted and not
        yet clients (TLS handshakes) count like clients (``reserve``)."""
        if self._clients() + self.handshaking >= self.max_clients:
            return FULL
        if self.exempt_loopback and _is_loopback(ip):
            return None
        if self.ip_counts.get(ip, 0) + self.handshakes.get(ip, 0) >= self.max_per_ip:
            return "Too many connections from your IP address"
        now = self.clock()
        times = self.throttle.setdefault(ip, deque())
        while times and times[0] <= now - self.throttle_window:
            times.popleft()
        if len(times) >= self.throttle_count:
            return "Too many connections too quickly; try again later"
        times.append(now)
        return None

    def log_refusal(self, ip: str, refusal: str, when: str = "") -> None:
        self.refused[refusal] = self.refused.get(refusal, 0) + 1
        if refusal != FULL:
            log.info("connection refused ip=%s reason=%r%s", ip, refusal, when)
            return
        # a full server refuses every new connection: say so once per interval, with a count
        now = self.clock()
        self._full_refused += 1
        if now - self._full_since >= _FULL_LOG_EVERY:
            log.warning(
                "connection refused ip=%s reason=%r (%d refused since the last such line; %d connections, "
                "limit %d)",
                ip, refusal, self._full_refused, self._clients() + self.handshaking, self.max_clients,
            )
            self._full_since = now
            self._full_refused = 0

    def reserve(self, ip: str, *, tls: bool = False) -> bytes | None:
        """A connection was accepted from ``ip``: check the limits now, and hold its place until
        ``admit(..., reserved=True)`` or ``release``. Returns the ``ERROR`` line when refused,
        else None."""
        refusal = self.refusal(ip)
        if refusal is not None:
            self.log_refusal(ip, refusal, " (before the TLS handshake)" if tls else "")
            return format_line("ERROR", [f"Closing link: {ip} ({refusal})"])
        self.handshakes[ip] = self.handshakes.get(ip, 0) + 1
        self.handshaking += 1
        return None

    def release(self, ip: str) -> None:
        """A reserved connection became a client, or went away before (a failed or abandoned
        TLS handshake)."""
        count = self.handshakes.get(ip, 0) - 1
        if count > 0:
            self.handshakes[ip] = count
        else:
            self.handshakes.pop(ip, None)
        self.handshaking = max(0, self.handshaking - 1)

    def admit(self, ip: str, *, reserved: bool = False) -> bytes | None:
        """A connection becomes a client: None when it may (it is counted), else the ``ERROR``
        line to send before closing it. ``reserved``: its place was taken at the accept."""
        if reserved:
            self.release(ip)  # the place held since the accept becomes the client's
        else:
            refusal = self.refusal(ip)
            if refusal is not None:
                self.log_refusal(ip, refusal)
                return format_line("ERROR", [f"Closing link: {ip} ({refusal})"])
        self.accepted += 1
        self.ip_counts[ip] = self.ip_counts.get(ip, 0) + 1
        return None

    def left(self, ip: str) -> None:
        """A client from ``ip`` is gone."""
        count = self.ip_counts.get(ip, 1) - 1
        if count > 0:
            self.ip_counts[ip] = count
        else:
            self.ip_counts.pop(ip, None)
