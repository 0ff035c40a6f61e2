"""What a one-user export holds of entries other people also spoke in: not the entries (their text holds the others'
words too), but the user's own turns of them, read back from the turns stream.

An entry is the user's alone when it is filed under the user, every speaker it records is the user, and so is every
speaker of every entry merged into it (a keeper gathers its members' keywords and persons). Entries written before
engram recorded speakers (no `speaker_ids`) count by their owner alone. Every other entry in which the user spoke
(filed under them or listing them as a speaker) is withheld, and the user's turns among its sources, as the stream
still holds them, stand in for it.
"""
from collections.abc import Iterable

from nats.js import JetStreamContext

from engram_client import subjects
from engram_client.contract import Turn
from shared.consolidation.words import turns_in
from shared.messaging import streams
from shared.store import EntryFilter, MemoryEntry, Scope, Store, pages


def _others(entry: MemoryEntry, user_id: str) -> bool:
    """Whether the entry may hold someone else's words."""
    return entry.user_id != user_id or any(s != user_id for s in entry.speaker_ids)


async def alone(store: Store, tenant: str, user_id: str, entries: list[MemoryEntry]) -> list[bool]:
    """For each entry, whether it holds the user's words and nobody else's (its merged members' included)."""
    members = {m.id: m for m in await store.get(Scope(tenant_id=tenant),
                                                sorted({i for e in entries for i in e.merged_from}))}
    return [not _others(e, user_id) and not any(_others(members[i], user_id) for i in e.merged_from if i in members)
            for e in entries]


async def withheld(store: Store, tenant: str, user_id: str) -> list[MemoryEntry]:
    """Every entry the user spoke in (filed under them or listing them as a speaker) that is not theirs alone."""
    found: dict[str, MemoryEntry] = {}
    for scope, entry_filter in ((Scope(tenant_id=tenant, user_id=user_id), None),
                                (Scope(tenant_id=tenant), EntryFilter(speaker_ids=[user_id]))):
        async for page in pages(store, scope, entry_filter):
            mine = await alone(store, tenant, user_id, page.entries)
            found.update((e.id, e) for e, own in zip(page.entries, mine, strict=True) if not own)
    return sorted(found.values(), key=lambda e: e.id)


async def own_turns(js: JetStreamContext, prefix: str, tenant: str, user_id: str,
                    entries: Iterable[MemoryEntry]) -> list[Turn]:
    """The user's turns among these entries' sources that the tenant's turns stream still holds, in stream order,
    each once."""
    wanted = {(e.conversation_id, t) for e in entries for t in e.source_turn_ids}
    stream = await streams.holding(js, prefix, tenant)
    if not wanted or stream is None:
        return []
    seen: set[tuple[str, str]] = set()
    found: list[Turn] = []
    for turn in await turns_in(js, stream.name, subjects.turns(prefix, tenant),
                               lambda t: t.user_id == user_id and (t.conversation_id, t.turn_id) in wanted):
        if (turn.conversation_id, turn.turn_id) not in seen:
            seen.add((turn.conversation_id, turn.turn_id))
            found.append(turn)
    return found
