"""The network's signatures on intro tokens: Ed25519 keys, JWTs (RFC 7519, EdDSA per RFC 8037) and
the public keys as a JWK Set (RFC 7517).

An intro token lets a requester talk to a target agent directly over A2A, outside the network. The
network signs it with a private key that never leaves its database; a target checks it with the
public keys at ``/.well-known/jwks.json`` alone, sharing no secret with the network. The newest
unretired key signs; ``pircd a2a rotate-key`` makes a new one and retires the old one, which stays
published until the last token it signed has expired (``SigningKey.signed_until``).

No I/O here: the keys come from ``ext/pircan/a2a/store.py``. PyJWT and cryptography are imported
with the first key or token made or read, not with the server (a few MiB it would hold idle).
"""

from __future__ import annotations

import base64
from typing import Any

from ext.pircan.a2a.store import SigningKey

__all__ = ["ALGORITHM", "CLAIMS", "TOKEN_TYPE", "jwk_set", "new_private_key", "public_jwk", "sign", "signed_claims",
           "verify"]

TOKEN_TYPE = "pircan-intro+jwt"  # the JWT "typ" header (explicit typing, RFC 8725 section 3.11)
ALGORITHM = "EdDSA"
# every claim an intro token carries
CLAIMS = ("iss", "sub", "aud", "agreement_id", "scope", "iat", "nbf", "exp", "jti")


def _private(raw: bytes | None = None) -> Any:
    """An Ed25519 private key: these bytes, or a new one."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate() if raw is None else Ed25519PrivateKey.from_private_bytes(raw)


def new_private_key() -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    return _private().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def public_jwk(key: SigningKey) -> dict[str, str]:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    public = _private(key.private_key).public_key()
    return {"kty": "OKP", "crv": "Ed25519", "x": _b64(public.public_bytes(Encoding.Raw, PublicFormat.Raw)),
            "kid": key.kid, "use": "sig", "alg": ALGORITHM}


def jwk_set(keys: list[SigningKey]) -> dict[str, Any]:
    return {"keys": [public_jwk(k) for k in keys]}


def sign(key: SigningKey, claims: dict[str, Any], token_type: str = TOKEN_TYPE) -> str:
    import jwt

    private = _private(key.private_key)
    return jwt.encode(claims, private, algorithm=ALGORITHM, headers={"kid": key.kid, "typ": token_type})


def verify(token: str, keys: list[SigningKey], issuer: str, now_s: float) -> dict[str, Any] | None:
    """The claims of an intro token this network signed with one of ``keys`` and that is valid at
    ``now_s`` (the server's clock); None for anything else (malformed, another signer, another
    issuer, not yet valid, expired). The audience is the target's to check."""
    claims = signed_claims(token, keys, issuer)
    if claims is None:
        return None
    exp, nbf = claims.get("exp"), claims.get("nbf")
    if not isinstance(exp, int) or not isinstance(nbf, int) or not nbf <= now_s < exp:
        return None
    return claims


def signed_claims(token: str, keys: list[SigningKey], issuer: str, token_type: str = TOKEN_TYPE,
                  required: tuple[str, ...] = CLAIMS) -> dict[str, Any] | None:
    """The claims of a token of ``token_type`` this network signed with one of ``keys``, whatever
    its times say (token introspection tells an expired token from one it never issued); None for
    a malformed token, another signer or another issuer."""
    import jwt

    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        return None
    if header.get("typ") != token_type or header.get("alg") != ALGORITHM:
        return None
    key = next((k for k in keys if k.kid == header.get("kid")), None)
    if key is None:
        return None
    public = _private(key.private_key).public_key()
    try:
        claims: dict[str, Any] = jwt.decode(
            token, public, algorithms=[ALGORITHM], issuer=issuer,
            options={"verify_aud": False, "verify_exp": False, "verify_nbf": False, "verify_iat": False,
                     "require": list(required)},
        )
    except jwt.PyJWTError:
        return None
    return claims
