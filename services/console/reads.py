"""What the console's pages read through the contract: every entry of a user or a conversation (page by page), the
owners of a tenant's entries, an entry and its history."""
from engram_client import MemoryClient
from engram_client.contract import EntriesRequest, EntryView

PAGE = 500           # entries per request (the contract's most)
MAX_ENTRIES = 20_000  # the most one page of the console reads; past it the page says so


async def all_entries(client: MemoryClient, *, user_id: str | None = None, conversation_id: str | None = None,
                      cap: int = MAX_ENTRIES) -> tuple[list[EntryView], bool]:
    """Every entry of the user or conversation, of every kind (superseded, merged and outdated ones included), and
    whether there were more than `cap`."""
    entries: list[EntryView] = []
    cursor: str | None = None
    while True:
        page = await client.entries(EntriesRequest(op="list", user_id=user_id, conversation_id=conversation_id,
                                                   limit=PAGE, cursor=cursor))
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


async def entry_and_history(client: MemoryClient, entry_id: str) -> tuple[EntryView | None, list[EntryView]]:
    """The entry (None when the tenant holds no such id) and its history: what it was merged from, the entries that
    superseded it in turn, and the newer evidence that may have outdated the last of them."""
    found = (await client.entries(EntriesRequest(op="get", ids=[entry_id]))).entries
    if not found:
        return None, []
    chain = (await client.entries(EntriesRequest(op="history", ids=[entry_id]))).entries
    return found[0], [e for e in chain if e.id != entry_id]
