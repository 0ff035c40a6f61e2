"""What the console's pages read through the contract: every entry of a user or a conversation (page by page), the
owners of a tenant's entries, an entry and its history."""
from dataclasses import dataclass

from engram_client import MemoryClient
from engram_client.contract import EntriesRequest, EntryKind, EntryView

PAGE = 500           # entries per request (the contract's most)
MAX_ENTRIES = 20_000  # the most one page of the console reads; past it the page says so


async def all_entries(client: MemoryClient, *, user_id: str | None = None, conversation_id: str | None = None,
                      kind: EntryKind | None = None, cap: int = MAX_ENTRIES) -> tuple[list[EntryView], bool]:
    """Every entry of the user or conversation (of one kind, or all), superseded, merged and outdated ones included,
    and whether there were more than `cap`."""
    entries: list[EntryView] = []
    cursor: str | None = None
    while True:
        page = await client.entries(EntriesRequest(op="list", user_id=user_id, conversation_id=conversation_id,
                                                   kind=kind, limit=PAGE, cursor=cursor))
        entries += page.entries
        cursor = page.next_cursor
        if cursor is None or len(entries) >= cap:
            return entries[:cap], cursor is not None or len(entries) > cap


async def owners(client: MemoryClient, op: str, *, user_id: str | None = None, after: str | None = None,
                 limit: int = 200) -> tuple[list[str], str | None]:
    """One page of the tenant's user ids (`users`) or conversation ids (`conversations`, of one user when given),
    and the cursor of the next page."""
    reply = await client.entries(EntriesRequest.model_validate(
        {"op": op, "user_id": user_id, "after": after, "limit": limit}))
    return reply.owners, reply.next_cursor


@dataclass(frozen=True)
class EntryStory:
    """An entry, the history the contract gives (what it was merged from, the entries that superseded it in turn,
    the newer evidence that may have outdated the last of them), and what it replaced (the entries of its kind and
    owner it superseded, absorbed or may outdate)."""

    entry: EntryView
    history: list[EntryView]
    replaced: list[EntryView]


async def entry_story(client: MemoryClient, entry_id: str) -> EntryStory | None:
    """The entry's story, or None when the tenant holds no such id."""
    found = (await client.entries(EntriesRequest(op="get", ids=[entry_id]))).entries
    if not found:
        return None
    entry = found[0]
    chain = (await client.entries(EntriesRequest(op="history", ids=[entry_id]))).entries
    peers, _ = await all_entries(client, kind=entry.kind, user_id=entry.user_id,
                                 conversation_id=None if entry.user_id else entry.conversation_id)
    replaced = [e for e in peers if entry.id in (e.superseded_by, e.merged_into, e.outdated_by)]
    return EntryStory(entry, [e for e in chain if e.id != entry_id],
                      sorted(replaced, key=lambda e: e.occurred_at, reverse=True))
