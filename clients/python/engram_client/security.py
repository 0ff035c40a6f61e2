"""How a client proves who it is to NATS: one identity, TLS, and the inbox prefix replies come back on."""
import ssl
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, repr=False)
class NatsSecurity:
    """One NATS identity (user and password, token, NKey seed (in a file, or the seed itself) or credentials file),
    TLS, and the inbox prefix replies come back on. repr never shows a secret.

    A product whose NATS user may subscribe only to `_INBOX_<tenant>.>` sets `inbox_prefix="_INBOX_<tenant>"`; for
    TLS, pass an `ssl.SSLContext` (e.g. `ssl.create_default_context(cafile=...)`, with `load_cert_chain` for mutual
    TLS).
    """

    user: str | None = None
    password: str | None = None
    token: str | None = None
    nkey_seed_file: str | None = None
    nkey_seed: str | None = None  # the seed itself (SU...), for a process that holds it in memory only
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
        if self.token:
            return "token"
        return "nkey" if self.nkey_seed_file or self.nkey_seed else "creds" if self.creds_file else "anonymous"

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments of nats-py's `Client.connect`."""
        options: dict[str, Any] = {"inbox_prefix": self.inbox_prefix}
        if self.user is not None:
            options.update(user=self.user, password=self.password)
        if self.token is not None:
            options["token"] = self.token
        if self.nkey_seed_file is not None:
            options["nkeys_seed"] = self.nkey_seed_file
        if self.nkey_seed is not None:
            options["nkeys_seed_str"] = self.nkey_seed
        if self.creds_file is not None:
            options["user_credentials"] = self.creds_file
        if self.tls is not None:
            options["tls"] = self.tls
        if self.tls_handshake_first:
            options["tls_handshake_first"] = True
        return options


ANONYMOUS = NatsSecurity()
