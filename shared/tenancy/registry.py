"""The tenants registry: the file `engram tenants` writes and engram's services read (ENGRAM_TENANTS_FILE).

It holds no secret: each NATS user's NKey public key (the seeds are written once, beside it, for whoever hands them
out) and each tenant's departures from the default quota. The NATS accounts configuration is rendered from it
(accounts.py). Writes are atomic: a reader sees the old file or the new one, never half of one.
"""
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

from engram_client.contract.base import TenantId
from shared.tenancy.quotas import QuotaChanges

UserKey = Annotated[str, StringConstraints(pattern=r"^U[A-Z2-7]{55}$")]  # an NKey user's public key


class TenantEntry(BaseModel):
    """One tenant: its product's NATS user and its quota's departures from the default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nkey: UserKey
    quota: QuotaChanges = Field(default_factory=QuotaChanges)
    added_at: AwareDatetime


class Registry(BaseModel):
    """Every tenant, and engram's own and the system account's users."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    prefix: str = Field(default="mem", pattern=r"^[A-Za-z0-9_-]{1,32}$")
    engram_nkey: UserKey
    system_nkey: UserKey
    tenants: dict[TenantId, TenantEntry] = Field(default_factory=dict)

    def with_tenant(self, tenant: str, entry: TenantEntry) -> "Registry":
        """The registry with `tenant` added or replaced."""
        return self.model_copy(update={"tenants": {**self.tenants, tenant: entry}})

    def without(self, tenant: str) -> "Registry":
        """The registry without `tenant`."""
        return self.model_copy(update={"tenants": {t: e for t, e in self.tenants.items() if t != tenant}})


def load(path: Path) -> Registry:
    """Read a registry file.

    Raises:
        OSError: it cannot be read.
        pydantic.ValidationError: it is not a registry.
    """
    return Registry.model_validate_json(path.read_bytes())


def write_atomically(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace `path` with `text` in one step (a temporary file beside it, flushed to disk, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def save(path: Path, registry: Registry) -> None:
    """Write the registry atomically."""
    write_atomically(path, registry.model_dump_json(indent=2, exclude_none=True) + "\n")


def now() -> datetime:
    """When an entry is added (UTC)."""
    return datetime.now(UTC)
