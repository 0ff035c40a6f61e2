"""Who may sign in to the console, and as whom: the operator's token (every tenant, through engram's own NATS
identity) or a tenant's NKey seed (that tenant alone, through its own NATS user), and a limit on failed attempts."""
import hmac
import logging
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import nkeys
from pydantic import SecretStr, ValidationError

from engram_client.security import NatsSecurity
from shared.errors import ConfigError
from shared.tenancy import registry

SEED_PREFIX = "SU"  # an NKey user seed, as `engram tenants add` hands it to a product
FAILURES_PER_MINUTE = 10  # failed sign-ins from one address before it must wait
MAX_ADDRESSES = 10_000    # addresses whose failures are remembered
log = logging.getLogger("engram.console")


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
        self._cached: tuple[int, registry.Registry] | None = None  # the registry, by the file's modification time

    @property
    def tenants_sign_in(self) -> bool:
        """Whether tenants can sign in (a registry names their keys)."""
        return self._registry_file is not None

    def _registry(self) -> registry.Registry | None:
        """The registry as the file holds it now; None without one, or when it cannot be read (logged)."""
        if self._registry_file is None:
            return None
        try:
            stamp = self._registry_file.stat().st_mtime_ns
            if self._cached is None or self._cached[0] != stamp:
                self._cached = (stamp, registry.load(self._registry_file))
            return self._cached[1]
        except (ConfigError, OSError, ValidationError) as exc:
            log.warning("the tenants registry cannot be read (%s): no tenant signs in", type(exc).__name__)
            return None

    def tenants(self) -> list[str]:
        """The registry's tenants (none without a readable registry)."""
        known = self._registry()
        return sorted(known.tenants) if known else []

    def still_valid(self, access: Access) -> bool:
        """Whether a tenant's access signed in earlier still holds: its seed's key is still the tenant's in the
        registry (not rotated, the tenant not removed). The operator's always holds."""
        if access.tenant is None or access.security is None or access.security.nkey_seed is None:
            return True
        known, public = self._registry(), _public_key(access.security.nkey_seed)
        entry = known.tenants.get(access.tenant) if known else None
        return entry is not None and public is not None and hmac.compare_digest(entry.nkey.encode(), public.encode())

    def check(self, token: str) -> Access | None:
        """The access `token` grants, or None."""
        token = token.strip()
        if not token:
            return None
        if self._operator is not None and hmac.compare_digest(token.encode(),
                                                              self._operator.get_secret_value().encode()):
            return Access(tenant=None)
        public = _public_key(token)
        known = self._registry() if public is not None else None
        if public is None or known is None:
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
        """Count a failed sign-in from `address` (the table keeps the 10,000 addresses that failed last)."""
        recent = self._failures.pop(address, None) or deque()
        recent.append(self._now())
        self._failures[address] = recent  # last in the table's order: the oldest go first
        while len(self._failures) > MAX_ADDRESSES:
            del self._failures[next(iter(self._failures))]
