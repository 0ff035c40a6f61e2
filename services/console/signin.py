"""Who may sign in to the console, and as whom: the operator's token (every tenant, through engram's own NATS
identity) or a tenant's NKey seed (that tenant alone, through its own NATS user), and a limit on failed attempts."""
import hmac
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import nkeys
from pydantic import SecretStr

from engram_client.security import NatsSecurity
from shared.errors import ConfigError
from shared.tenancy import registry

SEED_PREFIX = "SU"  # an NKey user seed, as `engram tenants add` hands it to a product
FAILURES_PER_MINUTE = 10  # failed sign-ins from one address before it must wait


@dataclass(frozen=True, repr=False)
class Access:
    """What a signed-in session reaches: every tenant (the operator), or one."""

    tenant: str | None  # None: the operator
    security: NatsSecurity | None = None  # a tenant's own NATS identity (the operator's is the console's)

    @property
    def operator(self) -> bool:
        """Whether the session may open any tenant."""
        return self.tenant is None

    def reaches(self, tenant: str) -> bool:
        """Whether the session may open `tenant`."""
        return self.tenant is None or self.tenant == tenant

    def __repr__(self) -> str:
        return f"Access(tenant={self.tenant!r})"


def _public_key(seed: str) -> str | None:
    """The public key of an NKey user seed, or None when `seed` is not one."""
    if not seed.startswith(SEED_PREFIX):
        return None
    try:
        key = nkeys.from_seed(bytearray(seed.encode()))
        return str(key.public_key.decode())
    except Exception:  # nkeys raises its own errors, and binascii's, for a malformed seed
        return None


class SignIn:
    """Checks a sign-in token: the operator's token (compared in constant time), or a tenant's seed whose public key
    the tenants registry lists (read again at each sign-in, so an added or rotated tenant signs in at once)."""

    def __init__(self, operator_token: SecretStr | None, registry_file: Path | None,
                 tenant_security: NatsSecurity) -> None:
        """
        Args:
            tenant_security: the TLS and inbox prefix a tenant's connection takes (its identity is its seed).
        """
        self._operator = operator_token
        self._registry_file = registry_file
        self._tenant_security = tenant_security

    @property
    def tenants_sign_in(self) -> bool:
        """Whether tenants can sign in (a registry names their keys)."""
        return self._registry_file is not None

    def tenants(self) -> list[str]:
        """The registry's tenants (none without a registry)."""
        if self._registry_file is None:
            return []
        return sorted(registry.load(self._registry_file).tenants)

    def check(self, token: str) -> Access | None:
        """The access `token` grants, or None."""
        token = token.strip()
        if not token:
            return None
        if self._operator is not None and hmac.compare_digest(token.encode(),
                                                              self._operator.get_secret_value().encode()):
            return Access(tenant=None)
        public = _public_key(token)
        if public is None or self._registry_file is None:
            return None
        try:
            known = registry.load(self._registry_file)
        except ConfigError:
            return None
        for tenant, entry in known.tenants.items():
            if hmac.compare_digest(entry.nkey.encode(), public.encode()):
                base = self._tenant_security
                return Access(tenant=tenant, security=NatsSecurity(
                    nkey_seed=token, tls=base.tls, tls_handshake_first=base.tls_handshake_first,
                    inbox_prefix=base.inbox_prefix))
        return None


class Attempts:
    """Failed sign-ins per address over the last minute: past FAILURES_PER_MINUTE, the address waits."""

    def __init__(self, per_minute: int = FAILURES_PER_MINUTE) -> None:
        self._per_minute = per_minute
        self._failures: dict[str, deque[float]] = {}
        self._now = time.monotonic

    def blocked(self, address: str) -> bool:
        """Whether `address` failed too often in the last minute."""
        recent = self._failures.get(address)
        if not recent:
            return False
        while recent and recent[0] < self._now() - 60:
            recent.popleft()
        return len(recent) >= self._per_minute

    def failed(self, address: str) -> None:
        """Count a failed sign-in from `address` (the table keeps at most 10,000 addresses)."""
        if len(self._failures) > 10_000:
            self._failures.clear()
        self._failures.setdefault(address, deque()).append(self._now())
