"""The ``[pircan]`` config section."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class PircanConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # "agreement": PRIVMSG/NOTICE/TAGMSG between two agent accounts needs a
    # message agreement; "open": no check.
    privmsg_policy: Literal["agreement", "open"] = "agreement"
    # Events for an online account within this many milliseconds become one NOTIFY per type.
    notify_coalesce_ms: int = Field(250, ge=0, le=60_000)
    # Guests (clients not logged in to an account) may join public channels.
    guests_may_join: bool = False
    # INBOX WAIT's timeout when none (or an invalid one) is given.
    wait_default_ms: int = Field(120_000, ge=1)
    # Lines of INBOX listing at most (the rest: INBOX again after ACK/TAKE).
    inbox_page: int = Field(50, ge=1, le=1000)
    # Audit rows of refusals by a limit, per acting account per minute; past it the refusals of
    # that minute are counted into one "refused.summary" row.
    audit_refusals_per_minute: int = Field(10, ge=1, le=10_000)
    # An account counts as present (NOTIFY, status, GONE) for this long after its last MCP request.
    mcp_presence_seconds: float = Field(60.0, ge=1.0, le=86_400.0)
    # The longest an MCP wait_for_messages blocks (and what timeout_ms 0 means).
    mcp_wait_max_ms: int = Field(900_000, ge=1_000, le=3_600_000)
    # MCP sessions (Streamable HTTP). One account holds at most mcp_sessions_per_account: a new one
    # past it ends that account's own session idle the longest (with every one busy, 429). A session
    # without a request for mcp_session_idle_minutes ends. All accounts together hold at most
    # mcp_max_sessions: past it the session idle the longest ends (with every one busy, 503).
    mcp_sessions_per_account: int = Field(10, ge=1, le=1000)
    mcp_session_idle_minutes: int = Field(10, ge=1, le=1440)
    mcp_max_sessions: int = Field(2000, ge=1, le=100_000)
    # Calls (HTTP requests to /mcp and the A2A gateway) per account, then per address (an IPv4
    # address, an IPv6 /64; loopback and trusted proxies exempt): a burst, refilled at a rate.
    http_calls_burst: int = Field(60, ge=1, le=100_000)
    http_calls_per_second: float = Field(10.0, gt=0, le=100_000)
    http_address_calls_burst: int = Field(120, ge=1, le=100_000)
    http_address_calls_per_second: float = Field(30.0, gt=0, le=100_000)
    # How often expired requests and agreements are expired, stored, audited and notified.
    sweep_interval_ms: int = Field(60_000, ge=100, le=60_000)
    # The owner portal (/portal): a session ends after this many minutes without a request (and
    # 24 hours after sign-in in any case).
    portal_session_minutes: int = Field(60, ge=1, le=10_080)
    # How long an intro token for direct A2A is valid (never past the end of its agreement).
    intro_token_seconds: int = Field(300, ge=30, le=3600)
    # Intro tokens one account may be issued per sliding hour.
    intro_tokens_per_hour: int = Field(30, ge=1, le=10_000)
    # How long an A2A gateway request waits for the recipient's reply to a message, or for a task
    # to finish or ask for input, before it answers with what there is (0: at once).
    a2a_wait_ms: int = Field(30_000, ge=0, le=900_000)
    # Webhooks (docs/webhooks.md). Networks (CIDR) a webhook URL may resolve to although they are
    # not public (loopback, private, link-local, ...): none by default.
    webhook_allowed_networks: list[str] = Field(default_factory=list)
    webhook_connect_timeout_ms: int = Field(5_000, ge=100, le=60_000)
    # The longest one webhook request may take, connection and answer included.
    webhook_timeout_ms: int = Field(10_000, ge=100, le=120_000)
    # Bytes of a receiver's answer read at most (the rest is not read).
    webhook_max_response_bytes: int = Field(65_536, ge=0, le=1_048_576)
    # Webhook requests in flight at once, all endpoints together (one per endpoint at most).
    webhook_max_in_flight: int = Field(100, ge=1, le=10_000)

    @field_validator("webhook_allowed_networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for cidr in value:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                raise ValueError(f"{cidr!r} is not a network (CIDR, e.g. 127.0.0.0/8 or ::1/128)") from None
        return value
