"""``GET /metrics`` on the HTTP listener: the server's metrics in Prometheus' text format.

Who may read them: a client on loopback (the Prometheus or node agent on the same machine), and a
client with the bearer token of an account listed in ``http.metrics_accounts`` (a scraper
elsewhere). The client's address is the one the listener computed: behind ``http.trusted_proxies``
the forwarded one, so a request relayed by a proxy on the same machine is not loopback. The
metrics name no account, channel or address, but they tell how busy the server is and which
refusals it answers: not for everyone.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ircd.net.addresses import is_loopback
from ircd.tokens import TokenThrottled

if TYPE_CHECKING:
    from ircd.server import Server

__all__ = ["metrics_endpoint"]

_ASK = ("Metrics are served to loopback clients and to the bearer token of an account in "
        "http.metrics_accounts\n")


def metrics_endpoint(server: "Server") -> Any:
    """The Starlette endpoint of ``/metrics``."""
    from starlette.responses import PlainTextResponse, Response

    async def metrics(request: Any) -> Response:
        ip = request.client.host if request.client is not None else ""
        if not is_loopback(ip):
            refusal = await _check_token(server, request.headers.get("authorization"), ip)
            if refusal is not None:
                status, text, headers = refusal
                return PlainTextResponse(text, status_code=status, headers=headers)
        body, content_type = server.metrics.render()
        return Response(body, media_type=content_type)

    return metrics


Answer = tuple[int, str, dict[str, str]]  # status, text, headers


async def _check_token(server: "Server", header: str | None, ip: str) -> Answer | None:
    """None when the header carries the token of a metrics account, else the answer."""
    challenge = {"WWW-Authenticate": 'Bearer realm="pircd metrics"'}
    if header is None or header[:7].lower() != "bearer " or not header[7:].strip():
        return 401, "Unauthorized: " + _ASK, challenge
    tokens = server.tokens
    if tokens is None:
        return 403, "Forbidden: this server has no account store, so no tokens; " + _ASK, {}
    identity = await tokens.verify(header[7:].strip(), ip)
    if isinstance(identity, TokenThrottled):
        why = ("Too many failed checks of this token" if identity.reason == "credential"
               else "Too many failed token checks from your address")
        return 429, why + "; try again later\n", {
            "Retry-After": str(math.ceil(identity.retry_after))}
    if identity is None:
        return 401, ("Unauthorized: the token is not valid (unknown, revoked, or its account "
                     "suspended)\n"), challenge
    allowed = {server.casefold(name) for name in server.config.http.metrics_accounts}
    if identity.account not in allowed:
        return 403, f"Forbidden: the account {identity.account} is not in http.metrics_accounts\n", {}
    return None
