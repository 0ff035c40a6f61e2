"""Operators' view of stored entries: list (filtered, paged), get by id, an entry's history, and who owns them."""
import asyncio
from datetime import datetime, timedelta
from typing import Literal

from engram_client.contract import EntriesRequest, EntriesResponse, EntryKind, check_tenant
from engram_client.errors import NotFound
from shared.retrieval.fit import Cursor, fit_all, fit_newest, fit_page
from shared.retrieval.views import entry_view
from shared.store import EntryFilter, MemoryEntry, Scope, Store


async def _history(store: Store, scope: Scope, entry_id: str) -> list[MemoryEntry]:
    """The entry, what it was merged from, the chain of entries that superseded it, and the newer evidence that may
    have outdated the last of them."""
    found = await store.get(scope, [entry_id])
    if not found:
        return []
    chain = list(found)
    chain += await store.get(scope, found[0].merged_from)
    seen = {e.id for e in chain}
    current = found[0]
    while current.superseded_by and current.superseded_by not in seen:
        nxt = await store.get(scope, [current.superseded_by])
        if not nxt:
            break
        current = nxt[0]
        seen.add(current.id)
        chain.append(current)
    if current.outdated_by and current.outdated_by not in seen:
        chain += await store.get(scope, [current.outdated_by])
    return chain


async def _owners(store: Store, scope: Scope, request: EntriesRequest, entry_filter: EntryFilter) -> EntriesResponse:
    """One page of the user (or conversation) ids owning the scope's entries, in order, from the payload index.
    Entries stored for no user are not listed under `users`."""
    key: Literal["user_id", "conversation_id"] = "user_id" if request.op == "users" else "conversation_id"
    owners = sorted(o for o in await store.distinct(scope, key, entry_filter)
                    if o and (request.after is None or o > request.after))
    page = owners[:request.limit]
    return EntriesResponse(owners=page, next_cursor=page[-1] if len(owners) > len(page) else None)


async def _counts(store: Store, scope: Scope, entry_filter: EntryFilter) -> EntriesResponse:
    """Entries of each kind in the scope (the kind asked, or all), and how many of them were replaced."""
    kinds: list[EntryKind] = list(entry_filter.kinds) or ["episodic", "fact", "profile"]
    active = entry_filter.model_copy(update={"include_superseded": False, "include_merged": False})
    counted = await asyncio.gather(*(store.count(scope, EntryFilter(kinds=[k])) for k in kinds),
                                   store.count(scope, entry_filter), store.count(scope, active))
    counts = {k: n for k, n in zip(kinds, counted, strict=False) if n}
    return EntriesResponse(counts={**counts, "replaced": counted[-2] - counted[-1]})


def _just_before(instant: datetime) -> datetime | None:
    """The instant a microsecond before (None before the first one a datetime holds)."""
    try:
        return instant - timedelta(microseconds=1)
    except OverflowError:
        return None


async def _instant(store: Store, scope: Scope, entry_filter: EntryFilter, instant: datetime, limit: int,
                   from_id: str | None = None) -> tuple[list[MemoryEntry], Cursor]:
    """Entries of one instant in id order (from `from_id` on), and where the listing goes on after them."""
    at = entry_filter.model_copy(update={"since": instant, "until": instant})
    page = await store.scroll(scope, entry_filter=at, limit=limit, offset=from_id)
    if page.next_offset is not None:
        return page.entries, (instant, page.next_offset)
    older = _just_before(instant)
    return page.entries, (older, None) if older is not None else None


async def _newest(store: Store, scope: Scope, request: EntriesRequest, entry_filter: EntryFilter,
                  max_reply_bytes: int | None) -> EntriesResponse:
    """A page of the scope's entries, the most recent first; entries of one instant in id order. The cursor is an
    instant (entries at or before it) and, inside an instant a page ended in, the id the next page starts from."""
    limit, until = request.limit, request.before
    page: list[MemoryEntry] = []
    if request.before is not None and request.before_id is not None:  # the rest of an instant first
        page, cursor = await _instant(store, scope, entry_filter, request.before, limit, request.before_id)
        if cursor is None or cursor[1] is not None or len(page) == limit:
            return fit_newest(page, cursor, max_reply_bytes)
        until, limit = cursor[0], limit - len(page)
    narrowed = entry_filter.model_copy(update={"until": until}) if until is not None else entry_filter
    found = await store.newest(scope, entry_filter=narrowed, limit=limit + 1)
    if len(found) <= limit:
        return fit_newest(page + found, None, max_reply_bytes)
    boundary = found[limit].occurred_at
    whole = [e for e in found[:limit] if e.occurred_at != boundary]  # the instants the page holds entirely
    if whole:
        return fit_newest(page + whole, (boundary, None), max_reply_bytes)
    # One instant holds more than the page has room for: the page is its first entries, in id order.
    more, cursor = await _instant(store, scope, narrowed, boundary, limit)
    return fit_newest(page + more, cursor, max_reply_bytes)


async def entries(store: Store, tenant: str, request: EntriesRequest,
                  max_reply_bytes: int | None = None) -> EntriesResponse:
    """Answer an EntriesRequest inside the tenant (and the user / conversation it names), in one message.

    Raises:
        NotFound: `history` of an id the scope does not hold (`get` answers the ids it finds, a list).
    """
    check_tenant(request, tenant)
    scope = Scope(tenant_id=tenant, user_id=request.user_id, conversation_id=request.conversation_id)
    if request.op == "get":
        return fit_all([entry_view(e) for e in await store.get(scope, request.ids)], max_reply_bytes)
    if request.op == "history":
        chain = await _history(store, scope, request.ids[0])
        if not chain:  # the same answer whether the id is another tenant's or nobody's: nothing to learn from it
            raise NotFound(f"entry {request.ids[0]!r} not found in tenant {tenant!r}"
                           + (" for this user / conversation" if request.user_id or request.conversation_id else ""))
        return fit_all([entry_view(e) for e in chain], max_reply_bytes)
    entry_filter = EntryFilter(kinds=[request.kind] if request.kind else [])
    if request.op in ("users", "conversations"):
        return await _owners(store, scope, request, entry_filter)
    if request.op == "counts":
        return await _counts(store, scope, entry_filter)
    if request.order == "newest":
        return await _newest(store, scope, request, entry_filter, max_reply_bytes)
    page = await store.scroll(scope, entry_filter=entry_filter, limit=request.limit, offset=request.cursor)
    return fit_page([entry_view(e) for e in page.entries], page.next_offset, max_reply_bytes)
