"""A deployment's tenants folder, as `engram tenants` keeps it:

    registry/tenants.json   the registry (no secret: public keys and quotas); ENGRAM_TENANTS_FILE names it
    accounts/accounts.conf  the NATS accounts, rendered from it; deploy/nats/nats.conf includes it from the folder
                            `accounts/` beside it
    nkeys/engram.nk         engram's own NATS user (its services' ENGRAM_NATS_NKEY_SEED_FILE)
    nkeys/sys.nk            the system account's user (reloads the servers' configuration)
    nkeys/tenants/<t>.nk    each product's user, handed to that product alone

The registry and the accounts are replaced whole (a new file renamed over the old), each in a folder of its own, so
that a container mounts the folder, not the file: a file mounted alone keeps showing the file it was when the
container started. Seeds are written once, readable by their owner alone (0600), and never stored in the registry.
"""
from dataclasses import dataclass
from pathlib import Path

from shared.errors import ConfigError
from shared.tenancy import accounts, nkeys, registry
from shared.tenancy.quotas import Quota, QuotaChanges
from shared.tenancy.registry import Registry, TenantEntry


@dataclass(frozen=True)
class TenantsFolder:
    """The files of one deployment's tenants."""

    root: Path

    @property
    def registry_file(self) -> Path:
        """The registry."""
        return self.root / "registry" / "tenants.json"

    @property
    def accounts_file(self) -> Path:
        """The rendered NATS accounts."""
        return self.root / "accounts" / "accounts.conf"

    @property
    def engram_seed(self) -> Path:
        """engram's own NATS user."""
        return self.root / "nkeys" / "engram.nk"

    @property
    def system_seed(self) -> Path:
        """The system account's user."""
        return self.root / "nkeys" / "sys.nk"

    def tenant_seed(self, tenant: str) -> Path:
        """A product's NATS user."""
        return self.root / "nkeys" / "tenants" / f"{tenant}.nk"

    def load(self) -> Registry:
        """The registry.

        Raises:
            ConfigError: there is none (run `engram tenants init` first) or it cannot be read.
        """
        if not self.registry_file.exists():
            raise ConfigError(f"no tenants registry at {self.registry_file}; create one with `engram tenants init "
                              f"--dir {self.root}`")
        try:
            return registry.load(self.registry_file)
        except Exception as exc:
            raise ConfigError(f"the tenants registry {self.registry_file} is unreadable: {exc}") from exc

    def save(self, changed: Registry, default: Quota) -> None:
        """Write the registry, then the accounts rendered from it (a server reloading between the two reads the
        previous accounts, still whole)."""
        registry.save(self.registry_file, changed)
        registry.write_atomically(self.accounts_file, accounts.render(changed, default))

    def init(self, prefix: str, default: Quota) -> Registry:
        """A new registry with engram's and the system account's users, and no tenant.

        Raises:
            ConfigError: the folder already holds a registry.
        """
        if self.registry_file.exists():
            raise ConfigError(f"{self.registry_file} exists already; add tenants to it with `engram tenants add`")
        engram, system = nkeys.new_user(), nkeys.new_user()
        nkeys.write_seed(self.engram_seed, engram)
        nkeys.write_seed(self.system_seed, system)
        made = Registry(prefix=prefix, engram_nkey=engram.public, system_nkey=system.public)
        self.save(made, default)
        return made

    def add(self, tenant: str, changes: QuotaChanges, default: Quota) -> Path:
        """Register a tenant with a new NATS user of its own; the path of its seed.

        Raises:
            ConfigError: the tenant is registered already.
        """
        current = self.load()
        if tenant in current.tenants:
            raise ConfigError(f"tenant {tenant!r} is registered already; change its quota with `engram tenants set`")
        user = nkeys.new_user()
        nkeys.write_seed(self.tenant_seed(tenant), user)
        entry = TenantEntry.model_validate({"nkey": user.public, "quota": changes, "added_at": registry.now()})
        self.save(current.with_tenant(tenant, entry), default)
        return self.tenant_seed(tenant)

    def set_quota(self, tenant: str, changes: QuotaChanges, default: Quota) -> Quota:
        """Change a tenant's quota (the fields `changes` sets); the quota it has now."""
        current = self.load()
        entry = self._entry(current, tenant)
        merged = entry.quota.merged(changes)
        self.save(current.with_tenant(tenant, entry.model_copy(update={"quota": merged})), default)
        return default.overridden(merged)

    def rotate(self, tenant: str, default: Quota) -> Path:
        """Give a tenant a new NATS user (the old seed stops working at the servers' reload); the new seed's path."""
        current = self.load()
        entry = self._entry(current, tenant)
        user = nkeys.new_user()
        nkeys.write_seed(self.tenant_seed(tenant), user)
        self.save(current.with_tenant(tenant, entry.model_copy(update={"nkey": user.public})), default)
        return self.tenant_seed(tenant)

    def remove(self, tenant: str, default: Quota) -> None:
        """Unregister a tenant (its product can no longer connect once the servers reload); its seed is deleted.
        What engram holds of the tenant stays until forgotten."""
        current = self.load()
        self._entry(current, tenant)
        self.save(current.without(tenant), default)
        self.tenant_seed(tenant).unlink(missing_ok=True)

    def _entry(self, current: Registry, tenant: str) -> TenantEntry:
        if tenant not in current.tenants:
            raise ConfigError(f"tenant {tenant!r} is not registered in {self.registry_file}")
        return current.tenants[tenant]
