"""Applying what a consolidation job decided: payload updates written entry by entry, announced first.

Events go out before the write (at least once, with a stable `event_id`), so a crash between the two announces
the change again on the next run instead of never. `updated_at` moves only for entries a job really changes.
"""
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engram_client.contract import EntriesMerged, EntrySuperseded, event_id
from shared.messaging.events import Publish
from shared.store import MemoryEntry, Scope, Store


@dataclass(frozen=True)
class Change:
    """Payload fields to set on one entry."""

    entry: MemoryEntry
    payload: dict[str, Any]


Changes = Callable[[str, list[Change]], Awaitable[None]]  # (tenant, changes)


def applier(store: Store, publish: Publish, now: datetime) -> Changes:
    """A function that announces and writes changes for a tenant."""

    async def apply(tenant: str, todo: list[Change]) -> None:
        merged: dict[str, list[str]] = {}
        for change in todo:
            into = change.payload.get("merged_into")
            if into and into != change.entry.merged_into:
                merged.setdefault(into, []).append(change.entry.id)
            by = change.payload.get("superseded_by")
            if by and by != change.entry.superseded_by:
                await publish(tenant, EntrySuperseded(
                    event_id=event_id("entry_superseded", change.entry.id, by), tenant_id=tenant, emitted_at=now,
                    entry_id=change.entry.id, superseded_by=by))
        for kept, ids in sorted(merged.items()):
            await publish(tenant, EntriesMerged(event_id=event_id("entries_merged", kept, *sorted(ids)),
                                                tenant_id=tenant, emitted_at=now, kept_id=kept,
                                                merged_ids=sorted(ids)))
        for change in todo:
            await store.set_payload(Scope(tenant_id=tenant), [change.entry.id],
                                    {**change.payload, "updated_at": now.isoformat()})

    return apply
