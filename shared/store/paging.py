"""Reading every entry of a scope, page by page, through any Store."""
from collections.abc import AsyncIterator

from shared.store.model import EntryFilter, MemoryEntry, Page, Scope
from shared.store.protocol import Store

PAGE = 500


async def pages(store: Store, scope: Scope, entry_filter: EntryFilter | None = None, *,
                with_vectors: bool = False, limit: int = PAGE) -> AsyncIterator[Page]:
    """Every page of a scroll over the scope and filter, in id order."""
    offset = None
    while True:
        page = await store.scroll(scope, entry_filter=entry_filter, limit=limit, offset=offset,
                                  with_vectors=with_vectors)
        yield page
        offset = page.next_offset
        if offset is None:
            return


async def all_entries(store: Store, scope: Scope, entry_filter: EntryFilter | None = None) -> list[MemoryEntry]:
    """Every entry of the scope matching the filter (payloads only)."""
    return [e async for page in pages(store, scope, entry_filter) for e in page.entries]
