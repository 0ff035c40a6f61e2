"""Each tenant's quota: the defaults from the settings, overridden per tenant by the registry.

NATS enforces what it can on its own (an account's connections, subscriptions and payload size; a turns stream's
bytes and message size); engram enforces the rest (request and ingest rates). Every field is per tenant.
"""
from pydantic import BaseModel, ConfigDict, Field

from shared.settings import Settings


class Quota(BaseModel):
    """The limits of one tenant."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_connections: int = Field(default=64, ge=1)            # NATS: the account's connections
    max_subscriptions: int = Field(default=1_000, ge=10)      # NATS: the account's subscriptions
    max_payload_bytes: int = Field(default=384 * 1024, ge=4096)  # NATS: one message (a legal turn takes < 310 KiB)
    turns_max_bytes: int = Field(default=1024 ** 3, ge=1024 ** 2)  # NATS: the turns stream (retained turns)
    recall_per_s: float = Field(default=200.0, gt=0)          # engram: recalls per second, per retriever
    recall_burst: int = Field(default=400, ge=1)
    requests_per_s: float = Field(default=20.0, gt=0)         # engram: entries, forget, consolidate per second
    requests_burst: int = Field(default=100, ge=1)
    ingest_per_s: float = Field(default=100.0, gt=0)          # engram: turns taken per second, per ingestor
    max_unacked_turns: int = Field(default=1_000, ge=1)       # NATS: the tenant's consumer's slots

    @classmethod
    def from_settings(cls, settings: Settings) -> "Quota":
        """The default quota the settings give every tenant."""
        return cls(max_connections=settings.tenant_max_connections,
                   max_subscriptions=settings.tenant_max_subscriptions,
                   max_payload_bytes=settings.tenant_max_payload_bytes,
                   turns_max_bytes=settings.tenant_turns_max_bytes,
                   recall_per_s=settings.tenant_recall_per_s, recall_burst=settings.tenant_recall_burst,
                   requests_per_s=settings.tenant_requests_per_s, requests_burst=settings.tenant_requests_burst,
                   ingest_per_s=settings.tenant_ingest_per_s, max_unacked_turns=settings.tenant_max_unacked_turns)

    def overridden(self, changes: "QuotaChanges") -> "Quota":
        """This quota with the fields `changes` sets."""
        return self.model_copy(update=changes.model_dump(exclude_none=True))


class QuotaChanges(BaseModel):
    """A tenant's departures from the default quota (the registry keeps only these)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_connections: int | None = Field(default=None, ge=1)
    max_subscriptions: int | None = Field(default=None, ge=10)
    max_payload_bytes: int | None = Field(default=None, ge=4096)
    turns_max_bytes: int | None = Field(default=None, ge=1024 ** 2)
    recall_per_s: float | None = Field(default=None, gt=0)
    recall_burst: int | None = Field(default=None, ge=1)
    requests_per_s: float | None = Field(default=None, gt=0)
    requests_burst: int | None = Field(default=None, ge=1)
    ingest_per_s: float | None = Field(default=None, gt=0)
    max_unacked_turns: int | None = Field(default=None, ge=1)

    def merged(self, more: "QuotaChanges") -> "QuotaChanges":
        """These changes with `more`'s on top."""
        return self.model_copy(update=more.model_dump(exclude_none=True))
