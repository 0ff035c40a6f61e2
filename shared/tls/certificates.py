"""A deployment's own certificate authority and the certificates of its NATS and Qdrant servers, made by `engram
certs` (never committed): what compose, the image test and Kubernetes mount.

    ca.pem, ca-key.pem          the authority clients trust (ENGRAM_NATS_TLS_CA_FILE, ENGRAM_QDRANT_TLS_CA_FILE)
    nats.pem, nats-key.pem      the NATS servers' certificate (every node's name in it)
    qdrant.pem, qdrant-key.pem  the Qdrant server's certificate

Keys are ECDSA P-256, readable by their owner alone (0600); certificates last `days`.
"""
import ipaddress
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NATS_NAMES = ("nats", "nats-1", "nats-2", "nats-3", "localhost", "127.0.0.1", "::1")
QDRANT_NAMES = ("qdrant", "localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Made:
    """The files `make` wrote."""

    ca: Path
    servers: dict[str, tuple[Path, Path]]  # name -> (certificate, key)


def _write(path: Path, data: bytes, private: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, 0o600 if private else 0o644)


def _key_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _san(names: tuple[str, ...]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def make(folder: Path, *, nats_names: tuple[str, ...] = NATS_NAMES, qdrant_names: tuple[str, ...] = QDRANT_NAMES,
         days: int = 365) -> Made:
    """Make a new authority and the NATS and Qdrant servers' certificates signed by it, in `folder`."""
    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "engram deployment CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
          .not_valid_after(now + timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    _write(folder / "ca.pem", ca.public_bytes(serialization.Encoding.PEM), private=False)
    _write(folder / "ca-key.pem", _key_bytes(ca_key), private=True)
    servers: dict[str, tuple[Path, Path]] = {}
    for server, names in (("nats", nats_names), ("qdrant", qdrant_names)):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=days))
                .add_extension(_san(names), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                               critical=False)
                .sign(ca_key, hashes.SHA256()))
        cert_file, key_file = folder / f"{server}.pem", folder / f"{server}-key.pem"
        _write(cert_file, cert.public_bytes(serialization.Encoding.PEM), private=False)
        _write(key_file, _key_bytes(key), private=True)
        servers[server] = (cert_file, key_file)
    return Made(ca=folder / "ca.pem", servers=servers)
