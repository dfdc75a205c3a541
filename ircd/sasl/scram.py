"""SCRAM-SHA-256 (RFC 5802, RFC 7677), server side.

The server stores only StoredKey and ServerKey (derived once from the
password with PBKDF2 when the password is set); a login costs two HMACs and
a hash, no key derivation.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from ircd.store.accounts import ScramKeys

__all__ = ["derive_keys", "ScramServer", "ScramError", "DEFAULT_ITERATIONS"]

DEFAULT_ITERATIONS = 4096


class ScramError(Exception):
    pass


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


def derive_keys(password: str, salt: bytes | None = None, iterations: int = DEFAULT_ITERATIONS) -> ScramKeys:
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    client_key = _hmac(salted, b"Client Key")
    stored_key = hashlib.sha256(client_key).digest()
    server_key = _hmac(salted, b"Server Key")
    return ScramKeys(salt, iterations, stored_key, server_key)


def _attributes(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(","):
        if len(part) >= 2 and part[1] == "=":
            out[part[0]] = part[2:]
    return out


def _unescape_name(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


@dataclass
class ScramServer:
    """One SCRAM exchange. ``first`` then ``final``; both raise ScramError on bad input."""

    username: str = ""
    client_first_bare: str = ""
    server_first: str = ""
    nonce: str = ""
    gs2_header: str = ""

    def first(self, message: str) -> str:
        """Parse client-first-message; return the username. Call ``server_first_message`` next."""
        parts = message.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or parts[0] == "p":
            raise ScramError("channel binding is not supported")
        self.gs2_header = parts[0] + "," + parts[1] + ","
        self.client_first_bare = parts[2]
        attrs = _attributes(parts[2])
        # a name has no NUL (RFC 5802's saslname), and no database could look one up
        if "m" in attrs or "n" not in attrs or "r" not in attrs or not attrs["r"] or "\0" in attrs["n"]:
            raise ScramError("malformed client-first-message")
        self.username = _unescape_name(attrs["n"])
        self.nonce = attrs["r"] + base64.b64encode(secrets.token_bytes(18)).decode()
        return self.username

    def server_first_message(self, salt: bytes, iterations: int) -> str:
        self.server_first = f"r={self.nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        return self.server_first

    def final(self, message: str, keys: ScramKeys) -> str:
        """Check client-final-message against the stored keys; return server-final-message."""
        without_proof, sep, proof_part = message.rpartition(",p=")
        if not sep:
            raise ScramError("missing proof")
        attrs = _attributes(without_proof)
        expected_binding = base64.b64encode(self.gs2_header.encode()).decode()
        if attrs.get("c") != expected_binding or attrs.get("r") != self.nonce:
            raise ScramError("channel binding or nonce mismatch")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramError("malformed proof") from None
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        client_signature = _hmac(keys.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise ScramError("bad proof")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), keys.stored_key):
            raise ScramError("bad proof")
        server_signature = _hmac(keys.server_key, auth_message)
        return "v=" + base64.b64encode(server_signature).decode()


def fake_keys(username: str, secret: bytes) -> ScramKeys:
    """Plausible keys for an unknown user, so SCRAM does not reveal which names exist."""
    salt = _hmac(secret, b"salt:" + username.encode())[:16]
    junk = _hmac(secret, b"key:" + username.encode())
    return ScramKeys(salt, DEFAULT_ITERATIONS, junk, junk)
