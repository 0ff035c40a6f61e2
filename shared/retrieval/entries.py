"""Operators' view of stored entries: list (filtered, paged), get by id, an entry's history, and who owns them."""
from typing import Literal

from engram_client.contract import EntriesRequest, EntriesResponse, check_tenant
from engram_client.errors import NotFound
from shared.retrieval.fit import fit_all, fit_page
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
    page = await store.scroll(scope, entry_filter=entry_filter, limit=request.limit, offset=request.cursor)
    return fit_page([entry_view(e) for e in page.entries], page.next_offset, max_reply_bytes)
