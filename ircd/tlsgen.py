"""Certificates for ``pircd init`` and ``pircd account issue-cert``.

``pircd init`` writes a self-signed server certificate (TLS in one step) and a
small certificate authority for client certificates. Python's ssl module can
only ask for client certificates it can verify, so SASL EXTERNAL works with
certificates from that authority (or any CA named in server.tls_client_ca);
the account is then found by the certificate's SHA-256 fingerprint.
"""

from __future__ import annotations

import datetime
import hashlib
import os
from pathlib import Path
from typing import Any

__all__ = ["write_self_signed", "write_client_ca", "issue_client_cert", "fingerprint"]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _write_key(path: Path, key: Any) -> None:
    from cryptography.hazmat.primitives import serialization

    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        os.fchmod(fd, 0o600)  # also when an existing file is overwritten
        fh.write(data)


def _write_cert(path: Path, cert: Any) -> None:
    from cryptography.hazmat.primitives import serialization

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _builder(subject: str, issuer: str, public_key: Any, days: int) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + datetime.timedelta(days=days))
    )


def write_self_signed(cert_path: Path, key_path: Path, hostname: str, days: int = 825) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(hostname, hostname, key.public_key(), days)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_key(key_path, key)
    _write_cert(cert_path, cert)


def write_client_ca(cert_path: Path, key_path: Path, network: str, days: int = 3650) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    name = f"{network} client CA"
    cert = (
        _builder(name, name, key.public_key(), days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(key, hashes.SHA256())
    )
    _write_key(key_path, key)
    _write_cert(cert_path, cert)


def issue_client_cert(ca_cert: Path, ca_key: Path, account: str, cert_path: Path, key_path: Path,
                      days: int = 825) -> str:
    """Issue a client certificate for ``account``; returns its SHA-256 fingerprint (hex)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    ca = x509.load_pem_x509_certificate(ca_cert.read_bytes())
    signer = serialization.load_pem_private_key(ca_key.read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    issuer = ca.subject.rfc4514_string().removeprefix("CN=")
    cert = (
        _builder(account, issuer, key.public_key(), days)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(signer, hashes.SHA256())  # type: ignore[arg-type]
    )
    _write_key(key_path, key)
    _write_cert(cert_path, cert)
    return fingerprint(cert.public_bytes(serialization.Encoding.DER))


def fingerprint(der: bytes) -> str:
    return hashlib.sha256(der).hexdigest()
