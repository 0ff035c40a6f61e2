"""Events engram publishes on `<prefix>.<tenant>.events.<kind>` after it changes memory."""
from typing import ClassVar, Literal

from pydantic import AwareDatetime, Field

from shared.contract.base import TenantId, TenantScoped

EventKind = Literal["entry_created", "entries_merged", "entry_superseded", "entries_forgotten"]


class Event(TenantScoped):
    """Base of every event: which tenant and when."""

    kind: ClassVar[EventKind]
    tenant_id: TenantId | None = None
    emitted_at: AwareDatetime


class EntryCreated(Event):
    """A closed window became a stored entry."""

    kind: ClassVar[EventKind] = "entry_created"
    entry_id: str
    conversation_id: str
    user_id: str | None = None
    source_turn_ids: list[str] = Field(default_factory=list)
    occurred_at: AwareDatetime


class EntriesMerged(Event):
    """Near-duplicates were merged into one entry."""

    kind: ClassVar[EventKind] = "entries_merged"
    kept_id: str
    merged_ids: list[str]


class EntrySuperseded(Event):
    """A newer entry replaces an older fact."""

    kind: ClassVar[EventKind] = "entry_superseded"
    entry_id: str
    superseded_by: str


class EntriesForgotten(Event):
    """Entries were deleted (a Forget request, TTL, or a low score)."""

    kind: ClassVar[EventKind] = "entries_forgotten"
    entry_ids: list[str] = Field(default_factory=list)
    count: int
    reason: str
