"""The tenants engram serves and each one's quota, as the services see them (the registry, read again when it
changes)."""
import logging
import time
from pathlib import Path

from shared.settings import Settings
from shared.tenancy import registry
from shared.tenancy.quotas import Quota, QuotaChanges

log = logging.getLogger("engram.tenancy")
RELOAD_CHECK_S = 2.0  # how often a changed registry file is noticed


class KnownTenants:
    """Every tenant's quota as the services see it: the settings' defaults, and the registry's overrides when
    ENGRAM_TENANTS_FILE names one (read again when the file changes). With a registry, only its tenants are served.
    """

    def __init__(self, default: Quota, registry_file: Path | None = None) -> None:
        self.default = default
        self._file = registry_file
        self._changes: dict[str, QuotaChanges] | None = None  # None: every tenant is served, with the default
        self._stamp: float | None = None
        self._checked = 0.0
        self._read()

    @classmethod
    def from_settings(cls, settings: Settings) -> "KnownTenants":
        """The quotas the settings describe."""
        return cls(Quota.from_settings(settings), settings.tenants_file)

    def _read(self) -> None:
        if self._file is None:
            return
        self._checked = time.monotonic()
        try:
            stamp = self._file.stat().st_mtime
        except OSError as exc:
            log.error("cannot read the tenants file %s (%s); keeping the quotas read before", self._file, exc)
            return
        if stamp == self._stamp:
            return
        try:
            tenants = registry.load(self._file).tenants
        except Exception as exc:  # a half-edited file: keep serving with what was read before, and say so
            log.error("the tenants file %s is unreadable (%s); keeping the quotas read before", self._file, exc)
            return
        self._changes = {tenant: entry.quota for tenant, entry in tenants.items()}
        self._stamp = stamp

    def _fresh(self) -> dict[str, QuotaChanges] | None:
        if self._file is not None and time.monotonic() - self._checked >= RELOAD_CHECK_S:
            self._read()
        return self._changes

    def served(self, tenant: str) -> bool:
        """Whether engram serves the tenant: any tenant without a registry, only its tenants with one."""
        changes = self._fresh()
        return changes is None or tenant in changes

    def of(self, tenant: str) -> Quota:
        """The tenant's quota."""
        changes = (self._fresh() or {}).get(tenant)
        return self.default if changes is None else self.default.overridden(changes)
