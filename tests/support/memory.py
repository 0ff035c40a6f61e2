"""What a tenant's memory holds: storing turns until they are memory, the turns its episodes cover, its entries
without their ids."""
from typing import Any

from engram_client import MemoryClient, wait_until_stored
from engram_client.contract import EntryView, Turn
from shared.store import EntryFilter, Scope, Store


async def stored_turn_ids(store: Store, tenant: str) -> list[str]:
    """Every source turn id of every episode of a tenant (with repeats, so duplicates show; facts restate turns
    an episode already holds)."""
    ids: list[str] = []
    offset = None
    while True:
        page = await store.scroll(Scope(tenant_id=tenant), entry_filter=EntryFilter(kinds=["episodic"]), limit=256,
                                  offset=offset)
        ids += [t for e in page.entries for t in e.source_turn_ids]
        if page.next_offset is None:
            return ids
        offset = page.next_offset


def memory_without_ids(views: list[EntryView]) -> list[tuple[Any, ...]]:
    """A tenant's memory without its ids (which embed the tenant), for comparing two tenants given the same turns:
    each entry's kind, text, sources, importance, and the texts of what superseded it, it was merged into, or may
    have outdated it."""
    by_id = {v.id: v for v in views}

    def text_of(entry_id: str | None) -> str | None:
        return by_id[entry_id].text if entry_id in by_id else entry_id

    return sorted((v.kind, v.text, tuple(v.source_turn_ids), text_of(v.superseded_by), text_of(v.merged_into),
                   v.importance, text_of(v.outdated_by)) for v in views)


async def store_all(client: MemoryClient, turns: list[Turn], timeout_s: float = 60.0) -> None:
    """Publish the turns, flush each of their conversations, and wait until every turn is stored."""
    await client.publish_turns(turns)
    for conversation_id in dict.fromkeys(t.conversation_id for t in turns):
        await client.flush(conversation_id)
    await wait_until_stored(client, turns, timeout_s=timeout_s)
