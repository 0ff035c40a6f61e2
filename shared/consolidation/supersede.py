"""Supersede: of the facts that state the same slot (person and attribute), the newest statement is current.

"Newest" is decided in code, by when the statement was made (`occurred_at`), then by ingest order
(`created_at`), then by conversation, turns and id, so a statement that arrives late but was made earlier is
superseded at once. Each older statement points to the next one (`superseded_by`) and ends when that one was
made (`valid_to`): the chain an entry's history shows. Nothing is deleted. The result is a pure function of the
slot's facts, so running it again changes nothing.
"""
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.consolidation.changes import Change, Changes
from shared.store import EntryFilter, MemoryEntry, Scope, Store, all_entries

SLOT_BATCH = 100  # slot keys read per scroll


def _order(entry: MemoryEntry) -> tuple[datetime, bool, datetime, str, list[str], str]:
    # Of a fact and a statement (a slotless fact the model put in the slot) made at the same time, the fact is
    # current: it names the slot's value, which the profile shows.
    return (entry.occurred_at, entry.attribute is not None, entry.created_at, entry.conversation_id,
            sorted(entry.source_turn_ids), entry.id)


@dataclass(frozen=True)
class Link:
    """Where an older statement of a slot stands: superseded by the next one, from when that one was made."""

    superseded_by: str | None
    valid_to: datetime | None
    sources: list[str] | None = None  # the current statement's: its own and those of the restatements before it


def _same(a: MemoryEntry, b: MemoryEntry) -> bool:
    return a.value is not None and b.value is not None and a.value.casefold() == b.value.casefold()


def chain(facts: Iterable[MemoryEntry]) -> dict[str, Link]:
    """Every fact's link, per slot: each statement superseded by the next newer one; the newest by none.

    The newest statement also keeps the source turns of the statements just before it that said the same
    ("I love dancing" in January and again in February): a restatement replaces nothing, so the turns that
    first said it stay reachable from the active facts.
    """
    by_slot: dict[str, list[MemoryEntry]] = {}
    for fact in facts:
        if fact.kind == "fact" and fact.slot_key:
            by_slot.setdefault(fact.slot_key, []).append(fact)
    links: dict[str, Link] = {}
    for statements in by_slot.values():
        statements.sort(key=_order)
        for older, newer in itertools.pairwise(statements):
            links[older.id] = Link(newer.id, newer.occurred_at)
        current = statements[-1]
        run = [current]
        for earlier in reversed(statements[:-1]):
            if not _same(earlier, current):
                break
            run.append(earlier)
        sources = list(dict.fromkeys(t for fact in run for t in _own(fact)))
        links[current.id] = Link(None, None, sources)
    return links


def _own(fact: MemoryEntry) -> list[str]:
    # A fact is stated in one turn, always its first source (see FactExtractor); the rest are restatements this
    # job added, recomputed from scratch each run so that the result never depends on the order facts arrived in.
    # A statement (no attribute) restates its window's turns and is never a restatement's keeper: all its own.
    return fact.source_turn_ids[:1] if fact.attribute is not None else fact.source_turn_ids


def changes(facts: list[MemoryEntry]) -> list[Change]:
    """The payload updates that bring these facts to their chain (none when they already are)."""
    out = []
    links = chain(facts)
    for fact in facts:
        link = links.get(fact.id)
        if link is None:
            continue
        payload: dict[str, Any] = {}
        if (fact.superseded_by, fact.valid_to) != (link.superseded_by, link.valid_to):
            payload = {"superseded_by": link.superseded_by,
                       "valid_to": link.valid_to.isoformat() if link.valid_to else None}
        wanted = link.sources if link.sources is not None else _own(fact)
        if wanted != fact.source_turn_ids:
            payload["source_turn_ids"] = wanted
        if payload:
            out.append(Change(entry=fact, payload=payload))
    return out


async def supersede_slots(store: Store, scope: Scope, slot_keys: list[str], apply: Changes) -> int:
    """Read every fact of these slots in `scope` (superseded ones included) and bring their chains up to date.

    Returns how many facts became superseded. Reads each slot's facts just before writing them, so a fact an
    ingestor writes meanwhile is at worst missed until the next run, never wrongly made current for good.
    """
    superseded = 0
    keys = sorted(set(slot_keys))
    for start in range(0, len(keys), SLOT_BATCH):
        batch = keys[start:start + SLOT_BATCH]
        found = await all_entries(store, scope, EntryFilter(kinds=["fact"], slot_keys=batch))
        facts = [f for f in found if scope.user_id is not None or f.user_id is None]
        todo = changes(facts)
        superseded += sum(1 for c in todo if c.payload.get("superseded_by") and not c.entry.superseded_by)
        await apply(scope.tenant_id, todo)
    return superseded
