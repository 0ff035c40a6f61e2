"""What the console's pages read through the contract, a few small requests at once per page: a page of a user's (or
a conversation's) entries newest first, their counts, their facts and profile, who owns them, an entry and its
history."""
import asyncio
from dataclasses import dataclass
from datetime import datetime

from engram_client import MemoryClient
from engram_client.contract import EntriesRequest, EntryKind, EntryView

PAGE = 500            # entries per request (the contract's most)
MAX_ENTRIES = 20_000  # the most one listing of the console reads (the facts of one user); past it the page says so
HISTORY_PAGE = 200    # entries per page of a timeline


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


Older = dict[str, str] | None  # the next (older) page's cursor: `before`, and `before_id` inside an instant


async def newest(client: MemoryClient, *, user_id: str | None, conversation_id: str | None,
                 before: datetime | None = None, before_id: str | None = None,
                 limit: int = HISTORY_PAGE) -> tuple[list[EntryView], Older]:
    """A page of the entries, the most recent first (from `before`, `before_id` on), and the next page's cursor."""
    reply = await client.entries(EntriesRequest(op="list", order="newest", user_id=user_id, limit=limit,
                                                conversation_id=conversation_id, before=before, before_id=before_id))
    if reply.next_cursor is None:
        return reply.entries, None
    older = {"before": reply.next_cursor}
    if reply.next_cursor_id:
        older["before_id"] = reply.next_cursor_id
    return reply.entries, older


async def counts(client: MemoryClient, *, user_id: str | None, conversation_id: str | None) -> dict[str, int]:
    """Entries of each kind, and `replaced`."""
    reply = await client.entries(EntriesRequest(op="counts", user_id=user_id, conversation_id=conversation_id))
    return reply.counts


@dataclass(frozen=True)
class Memory:
    """What a timeline shows of a user or a conversation: one page of its entries (newest first), every fact and
    profile (the current state, and what replaced what), counts, its conversations (a user's)."""

    page: list[EntryView]
    older: Older
    derived: list[EntryView]
    derived_truncated: bool
    counts: dict[str, int]
    conversations: list[str]


async def memory(client: MemoryClient, *, user_id: str | None = None, conversation_id: str | None = None,
                 before: datetime | None = None, before_id: str | None = None) -> Memory:
    """The timeline's reads, at once."""
    (page, older), (facts, cut), (profiles, _), counted, (conversations, _) = await asyncio.gather(
        newest(client, user_id=user_id, conversation_id=conversation_id, before=before, before_id=before_id),
        all_entries(client, user_id=user_id, conversation_id=conversation_id, kind="fact"),
        all_entries(client, user_id=user_id, conversation_id=conversation_id, kind="profile"),
        counts(client, user_id=user_id, conversation_id=conversation_id),
        owners(client, "conversations", user_id=user_id, limit=500) if user_id and not conversation_id
        else _nothing())
    return Memory(page, older, facts + profiles, cut, counted, conversations)


async def _nothing() -> tuple[list[str], str | None]:
    return [], None


@dataclass(frozen=True)
class EntryStory:
    """An entry, the history the contract gives (what it was merged from, the entries that superseded it in turn,
    the newer evidence that may have outdated the last of them), and what it replaced (the facts, or profiles, of
    its owner that it superseded or may outdate)."""

    entry: EntryView
    history: list[EntryView]
    replaced: list[EntryView]


async def entry_story(client: MemoryClient, entry_id: str) -> EntryStory | None:
    """The entry's story, or None when the tenant holds no such id."""
    found = (await client.entries(EntriesRequest(op="get", ids=[entry_id]))).entries
    if not found:
        return None
    entry = found[0]
    owner = {"user_id": entry.user_id, "conversation_id": None if entry.user_id else entry.conversation_id}
    # Only derived claims point forward at what replaced them (superseded_by, outdated_by); what an entry absorbed
    # by a merge is its own merged_from, in the history.
    kind: EntryKind = "profile" if entry.kind == "profile" else "fact"
    history, (peers, _) = await asyncio.gather(
        client.entries(EntriesRequest(op="history", ids=[entry_id])),
        all_entries(client, kind=kind, user_id=owner["user_id"], conversation_id=owner["conversation_id"]))
    replaced = [e for e in peers if entry.id in (e.superseded_by, e.merged_into, e.outdated_by)]
    return EntryStory(entry, [e for e in history.entries if e.id != entry_id],
                      sorted(replaced, key=lambda e: e.occurred_at, reverse=True))


@dataclass(frozen=True)
class ForgetTarget:
    """What a forget of a user or a conversation will erase: counts by kind, conversations, the newest entries."""

    counts: dict[str, int]
    conversations: list[str]
    newest: list[EntryView]


async def forget_target(client: MemoryClient, *, user_id: str | None = None,
                        conversation_id: str | None = None) -> ForgetTarget:
    """The confirmation's reads, at once."""
    counted, (conversations, _), (latest, _) = await asyncio.gather(
        counts(client, user_id=user_id, conversation_id=conversation_id),
        owners(client, "conversations", user_id=user_id, limit=500) if user_id else _nothing(),
        newest(client, user_id=user_id, conversation_id=conversation_id, limit=20))
    return ForgetTarget(counted, conversations or ([conversation_id] if conversation_id else []), latest)
