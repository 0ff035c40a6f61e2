"""How engram proves who it is to NATS and Qdrant: one identity (engram_client.security.NatsSecurity), TLS, and
secrets that never reach a log.

The settings hold secrets as SecretStr; they are revealed only here, as the arguments of a connect call.
"""
import ssl
from pathlib import Path
from typing import Any

from engram_client.security import NatsSecurity
from shared.errors import ConfigError
from shared.settings import Settings


def _readable(path: Path, what: str) -> str:
    if not path.is_file():
        raise ConfigError(f"{what} {str(path)!r} is not a readable file; fix the path or unset the variable")
    return str(path)


def tls_context(ca_file: Path | None, cert_file: Path | None = None, key_file: Path | None = None,
                what: str = "NATS") -> ssl.SSLContext | None:
    """A client TLS context trusting `ca_file` (the system's CAs when None), with a client certificate for mutual
    TLS; None when no file is given."""
    if ca_file is None and cert_file is None:
        return None
    context = ssl.create_default_context(
        cafile=_readable(ca_file, f"the {what} CA file") if ca_file is not None else None)
    if cert_file is not None and key_file is not None:
        context.load_cert_chain(_readable(cert_file, f"the {what} client certificate"),
                                _readable(key_file, f"the {what} client key"))
    return context


def broker_options(security: NatsSecurity) -> dict[str, Any]:
    """Keyword arguments of FastStream's `NatsBroker`: the identity and TLS as its `security`."""
    from faststream.nats import security as fs

    tls: dict[str, Any] = {"ssl_context": security.tls, "use_ssl": security.tls is not None,
                           "tls_handshake_first": security.tls_handshake_first}
    broker_security: fs.NatsSecurity
    if security.user is not None and security.password is not None:
        broker_security = fs.NatsUserPassword(security.user, security.password, **tls)
    elif security.token is not None:
        broker_security = fs.NatsToken(security.token, **tls)
    elif security.nkey_seed_file is not None:
        broker_security = fs.NatsNKey(security.nkey_seed_file, **tls)
    elif security.creds_file is not None:
        broker_security = fs.NatsCredentials(security.creds_file, **tls)
    else:
        broker_security = fs.NatsSecurity(**tls)
    return {"inbox_prefix": security.inbox_prefix, "security": broker_security}


def nats_security(settings: Settings) -> NatsSecurity:
    """The NATS identity and TLS the settings name (anonymous, no TLS and `_INBOX` when none is set).

    Raises:
        ConfigError: a named file is missing.
    """
    seed, creds = settings.nats_nkey_seed_file, settings.nats_creds_file
    return NatsSecurity(
        user=settings.nats_user,
        password=settings.nats_password.get_secret_value() if settings.nats_password else None,
        token=settings.nats_token.get_secret_value() if settings.nats_token else None,
        nkey_seed_file=_readable(seed, "ENGRAM_NATS_NKEY_SEED_FILE") if seed else None,
        creds_file=_readable(creds, "ENGRAM_NATS_CREDS_FILE") if creds else None,
        tls=tls_context(settings.nats_tls_ca_file, settings.nats_tls_cert_file, settings.nats_tls_key_file),
        tls_handshake_first=settings.nats_tls_handshake_first, inbox_prefix=settings.nats_inbox_prefix)


def qdrant_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments of qdrant-client for ENGRAM_QDRANT_URL: the API key and a CA to trust over https."""
    options: dict[str, Any] = {}
    if settings.qdrant_api_key is not None:
        options["api_key"] = settings.qdrant_api_key.get_secret_value()
    context = tls_context(settings.qdrant_tls_ca_file, what="Qdrant")
    if context is not None:
        options["verify"] = context
    return options
