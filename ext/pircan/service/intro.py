"""Intro tokens for direct A2A, and the agreement check that goes with them.

Two agents with an agreement may talk directly over A2A, outside the network. The requester asks
the network for an **intro token** for the target (IRC ``INTRO``, MCP ``request_intro_token``, or the
A2A gateway): a JWT signed with the network's Ed25519 key that names the requester (``sub``), the
target (``aud``), the agreement (``agreement_id``) and the scopes the requester holds toward the
target under it (``scope``), valid for ``pircan.intro_token_seconds`` and never past the agreement's
end. The target verifies it with the network's published keys (``/.well-known/jwks.json``) and may
ask the network whether the agreement is still active (``check_agreement``), so that a revocation
takes effect for direct A2A too.

Issuing needs an active agreement giving the requester at least one scope toward the target and an
endpoint the target published; it is limited to ``pircan.intro_tokens_per_hour`` per requester
(counted in the audit log, inside the transaction that signs) and audited (``intro.issue``). The
signature, the audit row and the signing key's last expiry are one transaction; an agreement
revoked before it commits refuses the token (``NO_AGREEMENT``), as for SEND.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ircd.api import Conn

from ext.pircan import store as db
from ext.pircan.a2a import PATHS, keys
from ext.pircan.a2a import store as astore
from ext.pircan.ids import hexid, parse_id, ts
from ext.pircan.rules import HOUR_MS, allows
from ext.pircan.service.contact import agreement_state, owns, peer_of
from ext.pircan.service.events import audit_refusal, by_whom
from ext.pircan.service.profile import endpoint_of
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ext.pircan.store import Agreement

__all__ = [
    "JWKS_PATH",
    "Intro",
    "agreement_for",
    "check_agreement",
    "ensure_signing_key",
    "intro_json",
    "introspect",
    "issue_intro",
    "usable_scopes",
    "verify_intro",
]

JWKS_PATH = PATHS.jwks


@dataclass(frozen=True, slots=True)
class Intro:
    token: str
    requester: str
    target: str
    agreement_id: int
    scopes: tuple[str, ...]
    endpoint: str
    issuer: str
    expires_at: int  # ms
    token_id: int  # the token's jti


def usable_scopes(agreement: Agreement, account: str) -> tuple[str, ...]:
    """The scopes of ``agreement`` that ``account`` may use toward the other party (``message`` both
    ways, the others from requester to target)."""
    return tuple(s for s in agreement.scopes
                 if allows(agreement.scopes, agreement.requester, agreement.target, account, s))


def agreement_for(state: Pircan, requester: str, target: str, now: int) -> tuple[Agreement | None, str]:
    """The active agreement between the two whose scopes ``requester`` may use, the longest-lived;
    or None and why (NO_AGREEMENT, SCOPE_MISSING)."""
    ids = state.pairs.get(state.pair(requester, target), set())
    live = [state.agreements[i] for i in ids if state.agreements[i].active(now)]
    if not live:
        return None, "NO_AGREEMENT"
    usable = [a for a in live if usable_scopes(a, requester)]
    if not usable:
        return None, "SCOPE_MISSING"
    return max(usable, key=lambda a: a.expires_at), ""


def _issue_txn(conn: Conn, agreement: Agreement, claims: dict[str, Any], now: int, limit: int,
               audit_id: int, detail: str) -> str:
    if not db.agreements_live(conn, {agreement.id}, now):
        raise Refused("NO_AGREEMENT")
    issued = conn.execute(
        "SELECT COUNT(*) FROM pircan_audit WHERE actor = ? AND action = 'intro.issue' AND id >= ?",
        (claims["sub"], db.first_id_after(now - HOUR_MS)),
    ).fetchone()[0]
    if issued >= limit:
        raise Refused("RATE_LIMITED")
    key = astore.signing_key(conn)
    if key is None:
        raise RuntimeError("no signing key for intro tokens")
    token = keys.sign(key, claims)
    astore.note_signed(conn, key.kid, claims["exp"] * 1000)
    db.audit(conn, audit_id, now, claims["sub"], claims["aud"], "intro.issue", detail)
    return token


def intro_json(intro: Intro) -> dict[str, Any]:
    """An issued intro token as MCP and A2A return it."""
    return {"token": intro.token, "token_type": "Bearer", "agent": intro.target,
            "agreement_id": hexid(intro.agreement_id), "scopes": list(intro.scopes),
            "expires_at": ts(intro.expires_at), "endpoint": intro.endpoint, "issuer": intro.issuer,
            "jwks_uri": intro.issuer + JWKS_PATH}


async def issue_intro(state: Pircan, requester: str, target_name: str, *, via: str = "irc") -> Intro:
    """An intro token for ``requester`` to talk to ``target_name`` directly. Refusals, in this order:
    NO_SUCH_ACCOUNT, SELF_CONTACT, NO_AGREEMENT / SCOPE_MISSING (audited), NO_ENDPOINT, NOT_ALLOWED
    (the network serves no HTTP listener to publish its keys on), RATE_LIMITED (audited)."""
    api = state.api
    target = peer_of(state, requester, target_name)
    now = state.now_ms()
    agreement, why = agreement_for(state, requester, target, now)
    if agreement is None:
        audit_refusal(state, requester, target, "INTRO", why)
        raise Refused(why, target_name, text="You need an active agreement with this account for an intro token")
    endpoint = await endpoint_of(state, target)
    if endpoint is None:
        raise Refused("NO_ENDPOINT", target_name)
    issuer = api.http_base_url
    if not issuer:
        raise Refused("NOT_ALLOWED", target_name, text="Intro tokens need the server's HTTP listener ([http])")
    scopes = usable_scopes(agreement, requester)
    iat = now // 1000
    exp = min(now + state.cfg.intro_token_seconds * 1000, agreement.expires_at) // 1000
    if exp <= iat:
        raise Refused("NO_AGREEMENT", target_name, text="The agreement ends now")
    jti = state.new_id()
    claims = {"iss": issuer, "sub": requester, "aud": target, "agreement_id": hexid(agreement.id),
              "scope": " ".join(scopes), "iat": iat, "nbf": iat, "exp": exp, "jti": hexid(jti)}
    detail = (f"{hexid(jti)} for {target} agreement={hexid(agreement.id)} scopes={','.join(scopes)} "
              f"expires={ts(exp * 1000)}" + by_whom(requester, requester, via))
    try:
        token = await state.database.write(_issue_txn, agreement, claims, now, state.cfg.intro_tokens_per_hour,
                                           state.new_id(), detail)
    except Refused as exc:
        if exc.code == "RATE_LIMITED":
            audit_refusal(state, requester, target, "INTRO", exc.code)
            raise Refused(exc.code, target_name,
                          text=f"At most {state.cfg.intro_tokens_per_hour} intro tokens per hour") from None
        raise Refused(exc.code, target_name) from None
    return Intro(token, requester, target, agreement.id, scopes, endpoint, issuer, exp * 1000, jti)


async def verify_intro(state: Pircan, token: str) -> dict[str, Any] | None:
    """The claims of an intro token this network issued that is valid now, or None."""
    issuer = state.api.http_base_url
    if not issuer or token.count(".") != 2:
        return None
    published = await state.database.read(astore.published_keys, state.now_ms())
    return keys.verify(token, published, issuer, state.api.now())


async def check_agreement(state: Pircan, agreement_id: str, *, account: str | None = None,
                          claims: dict[str, Any] | None = None) -> tuple[Agreement, str]:
    """An agreement and its state now (active, revoked, expired), for a party of it (or a party's
    owner: ``account``) or for the holder of a valid intro token naming it (``claims``);
    NO_SUCH_AGREEMENT for anyone else, exactly as for an id nobody uses."""
    ident = parse_id(agreement_id)
    agreement = state.agreements.get(ident) if ident is not None else None
    if agreement is None and ident is not None:
        agreement = await state.database.read(db.get_agreement, ident)
    allowed = False
    if agreement is not None and claims is not None:
        allowed = claims.get("agreement_id") == hexid(agreement.id)
    elif agreement is not None and account is not None:
        parties = (agreement.requester, agreement.target)
        allowed = account in parties or any([await owns(state, account, p) for p in parties])
    if agreement is None or not allowed:
        raise Refused("NO_SUCH_AGREEMENT", agreement_id)
    return agreement, agreement_state(agreement, state.now_ms())


async def introspect(state: Pircan, caller: str, token: str) -> dict[str, Any]:
    """Token introspection (RFC 7662's answer) of an intro token, for a party it names (its
    requester or its target) or a party's owner: ``active`` and ``status`` (``valid``, ``revoked``,
    ``expired``), the claims, and the agreement's parties, scopes and end as they are now, so a
    revoke shows at once, not when the token expires. A token this network did not sign, a
    malformed one, or one that names neither the caller nor an agent it owns is ``unknown``, with
    nothing else (the same answer, so introspection tells nobody else about a token)."""
    unknown = {"active": False, "status": "unknown"}
    issuer = state.api.http_base_url
    if not issuer or not isinstance(token, str) or token.count(".") != 2:
        return unknown
    every_key = await state.database.read(astore.all_keys)
    claims = keys.signed_claims(token, every_key, issuer)
    if claims is None:
        return unknown
    parties = (str(claims.get("sub")), str(claims.get("aud")))
    if caller not in parties and not any([await owns(state, caller, p) for p in parties]):
        return unknown
    ident = parse_id(str(claims.get("agreement_id")))
    agreement = state.agreements.get(ident) if ident is not None else None
    if agreement is None and ident is not None:
        agreement = await state.database.read(db.get_agreement, ident)
    if agreement is None:
        return unknown
    now = state.now_ms()
    status = agreement_state(agreement, now)
    if status == "active":
        status = "valid" if claims["nbf"] <= now // 1000 < claims["exp"] else "expired"
    return {
        "active": status == "valid", "status": status, "token_type": "Bearer", "iss": claims["iss"],
        "sub": claims["sub"], "aud": claims["aud"], "scope": claims["scope"], "iat": claims["iat"],
        "nbf": claims["nbf"], "exp": claims["exp"], "jti": claims["jti"],
        "agreement_id": hexid(agreement.id), "requester": agreement.requester, "target": agreement.target,
        "agreement_scopes": list(agreement.scopes), "agreement_expires_at": ts(agreement.expires_at),
        "revoked_at": None if agreement.revoked_at is None else ts(agreement.revoked_at),
    }


def _ensure_txn(conn: Conn, kid: str, now: int) -> bool:
    if astore.signing_key(conn) is not None:
        return False
    astore.insert_key(conn, kid, keys.new_private_key(), now)  # made only when there is none
    return True


async def ensure_signing_key(state: Pircan) -> None:
    """At start-up: make the first signing key of a new database."""
    await state.database.migrate(astore.TRACK, astore.MIGRATIONS)
    if await state.database.write(_ensure_txn, hexid(state.new_id()), state.now_ms()):
        state.api.log.info("a2a: made the first key for intro tokens")
