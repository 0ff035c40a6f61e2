"""Operators' view of stored entries: list (filtered, paged), get by id, an entry's history, and who owns them."""
import asyncio
from datetime import datetime, timedelta
from typing import Literal

from engram_client.contract import EntriesRequest, EntriesResponse, EntryKind, check_tenant
from engram_client.errors import NotFound
from shared.retrieval.fit import fit_all, fit_newest, fit_page
from shared.retrieval.views import entry_view
from shared.store import EntryFilter, MemoryEntry, Scope, Store, all_entries


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


async def _newest(store: Store, scope: Scope, request: EntriesRequest, entry_filter: EntryFilter,
                  max_reply_bytes: int | None) -> EntriesResponse:
    """A page of the scope's entries, the most recent first. A page never splits the entries of one instant (the
    next page starts at the instant after the page's last, `next_cursor`); an instant holding more entries than a
    page comes whole, on a page of its own."""
    narrowed = entry_filter.model_copy(update={"until": request.before}) if request.before else entry_filter
    found = await store.newest(scope, entry_filter=narrowed, limit=request.limit + 1)
    next_before: datetime | None = None
    if len(found) > request.limit:
        boundary = found[request.limit].occurred_at
        found = [e for e in found[:request.limit] if e.occurred_at != boundary]
        next_before = boundary
        if not found:  # one instant fills the page: all of it, and the next page starts just before it
            found = await all_entries(store, scope, narrowed.model_copy(update={"since": boundary,
                                                                                "until": boundary}))
            next_before = boundary - timedelta(microseconds=1)
    return fit_newest([entry_view(e) for e in found], next_before, max_reply_bytes)


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
