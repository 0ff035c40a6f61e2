"""Events engram publishes on `<prefix>.<tenant>.events.<kind>` after it changes memory.

Delivery is at least once: engram publishes an event before it records the change as done, so a crash in between
publishes it again. Every event carries an `event_id` that is the same each time the same change is announced
(a UUIDv5 of its kind and what changed), so a consumer de-duplicates on it.
"""
import uuid
from typing import ClassVar, Literal

from pydantic import AwareDatetime, Field

from engram_client.contract.base import TenantId, TenantScoped

EventKind = Literal["entry_created", "entries_merged", "entry_superseded", "entries_forgotten"]


_EVENT_NAMESPACE = uuid.UUID("9a3f5e0c-1d2b-4c6e-8f7a-2b1c0d9e8f71")


def event_id(kind: EventKind, *what: str) -> str:
    """The stable id of the event announcing this change: the same inputs always give the same id."""
    return str(uuid.uuid5(_EVENT_NAMESPACE, "\x1f".join((kind, *what))))


class Event(TenantScoped):
    """Base of every event: which change (a stable id to de-duplicate on), which tenant, and when it was sent."""

    kind: ClassVar[EventKind]
    event_id: str
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


EVENT_TYPES: dict[EventKind, type[Event]] = {
    model.kind: model for model in (EntryCreated, EntriesMerged, EntrySuperseded, EntriesForgotten)}


def parse_event(subject: str, data: bytes) -> Event | None:
    """The event a message on `<prefix>.<tenant>.events.<kind>` carries; None for a kind this client does not know
    (a newer engram may announce more)."""
    model = EVENT_TYPES.get(subject.rsplit(".", 1)[-1])  # type: ignore[call-overload]
    return model.model_validate_json(data) if model is not None else None
