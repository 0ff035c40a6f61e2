"""How engram proves who it is to NATS and Qdrant: one identity, TLS, and secrets that never reach a log.

The settings hold secrets as SecretStr; they are revealed only here, as the arguments of a connect call.
"""
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True, repr=False)
class NatsSecurity:
    """One NATS identity (user and password, token, NKey seed file or credentials file), TLS, and the inbox prefix
    replies come back on. repr never shows a secret."""

    user: str | None = None
    password: str | None = None
    token: str | None = None
    nkey_seed_file: str | None = None
    creds_file: str | None = None
    tls: ssl.SSLContext | None = None
    tls_handshake_first: bool = False
    inbox_prefix: str = "_INBOX"

    def __repr__(self) -> str:
        return f"NatsSecurity(identity={self.identity}, tls={self.tls is not None}, inbox={self.inbox_prefix})"

    @property
    def identity(self) -> str:
        """Which kind of identity is used, for logs: user:<name>, token, nkey, creds or anonymous."""
        if self.user:
            return f"user:{self.user}"
        return ("token" if self.token else "nkey" if self.nkey_seed_file else "creds" if self.creds_file
                else "anonymous")

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments of nats-py's `Client.connect`."""
        options: dict[str, Any] = {"inbox_prefix": self.inbox_prefix}
        if self.user is not None:
            options.update(user=self.user, password=self.password)
        if self.token is not None:
            options["token"] = self.token
        if self.nkey_seed_file is not None:
            options["nkeys_seed"] = self.nkey_seed_file
        if self.creds_file is not None:
            options["user_credentials"] = self.creds_file
        if self.tls is not None:
            options["tls"] = self.tls
        if self.tls_handshake_first:
            options["tls_handshake_first"] = True
        return options

    def broker_options(self) -> dict[str, Any]:
        """Keyword arguments of FastStream's `NatsBroker`: the identity and TLS as its `security`."""
        from faststream.nats import security as fs

        tls: dict[str, Any] = {"ssl_context": self.tls, "use_ssl": self.tls is not None,
                               "tls_handshake_first": self.tls_handshake_first}
        security: fs.NatsSecurity
        if self.user is not None and self.password is not None:
            security = fs.NatsUserPassword(self.user, self.password, **tls)
        elif self.token is not None:
            security = fs.NatsToken(self.token, **tls)
        elif self.nkey_seed_file is not None:
            security = fs.NatsNKey(self.nkey_seed_file, **tls)
        elif self.creds_file is not None:
            security = fs.NatsCredentials(self.creds_file, **tls)
        else:
            security = fs.NatsSecurity(**tls)
        return {"inbox_prefix": self.inbox_prefix, "security": security}


ANONYMOUS = NatsSecurity()


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
