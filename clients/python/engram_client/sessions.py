"""Helpers a product, a test or a benchmark uses around the SDK: publish whole sessions, wait until stored."""
import asyncio
import time
from collections.abc import Sequence

from engram_client.client import MemoryClient
from engram_client.contract import Turn
from engram_client.errors import Timeout


async def publish_sessions(client: MemoryClient, sessions: Sequence[Sequence[Turn]]) -> None:
    """Publish each conversation's turns and flush it, as a chat product does at the end of a session."""
    for turns in sessions:
        if turns:
            await client.publish_turns(turns)
            await client.flush(turns[0].conversation_id)


async def wait_until_stored(client: MemoryClient, turns: Sequence[Turn], timeout_s: float = 120.0,
                            interval_s: float = 0.5) -> None:
    """Wait until every turn is a source of some stored episode (flush the conversations first)."""
    pending: dict[str, set[str]] = {}
    for turn in turns:
        pending.setdefault(turn.conversation_id, set()).add(turn.turn_id)
    deadline = time.monotonic() + timeout_s
    while pending:
        for conversation_id in list(pending):
            cursor = None
            while True:
                page = await client.entries(op="list", conversation_id=conversation_id, kind="episodic", limit=500,
                                            cursor=cursor)
                for entry in page.entries:
                    pending[conversation_id] -= set(entry.source_turn_ids)
                cursor = page.next_cursor
                if cursor is None or not pending[conversation_id]:
                    break
            if not pending[conversation_id]:
                del pending[conversation_id]
        if pending:
            if time.monotonic() > deadline:
                missing = sum(len(v) for v in pending.values())
                raise Timeout(f"{missing} turns in {len(pending)} conversations not stored after {timeout_s}s")
            await asyncio.sleep(interval_s)
