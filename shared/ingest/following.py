"""Following the open index: this replica's copy of which conversations have turns waiting, and when to look next."""
import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from shared.ingest.batching import Conversation
from shared.runtime import metrics
from shared.working_memory.buffer import Buffer
from shared.working_memory.open_index import OpenIndex

log = logging.getLogger("engram.closer")

INDEX_REFRESH_S = 300.0  # the open-index watch is started over this often (and after any error)


class OpenConversations:
    """The conversations of the open index, each with when the closer should look at it next."""

    def __init__(self, index: OpenIndex, look_after_s: float) -> None:
        self._index = index
        self._look_after = timedelta(seconds=look_after_s)  # a newly marked conversation is looked at after this
        self.due_at: dict[Conversation, datetime] = {}

    def due(self, now: datetime) -> list[Conversation]:
        """The conversations to look at now."""
        return [c for c, at in self.due_at.items() if at <= now]

    def look_again(self, conversation: Conversation, at: datetime) -> None:
        """Look at the conversation next at `at`."""
        self.due_at[conversation] = at

    async def unmark_if_inactive(self, conversation: Conversation,
                                 read_buffer: Callable[[], Awaitable[Buffer | None]]) -> None:
        """Take the conversation out of the index if its buffer has nothing waiting (see open_index.py)."""
        known = self.due_at.get(conversation)
        unmarked = await self._index.unmark_if_inactive(*conversation, read_buffer)
        # Forget it here unless the watch re-added it meanwhile (marked again after the purge).
        if unmarked and self.due_at.get(conversation) is known:
            self.due_at.pop(conversation, None)

    async def follow(self, stopping: asyncio.Event) -> None:
        """Keep `due_at` equal to the open index until `stopping` is set, starting the watch over after an error
        and every INDEX_REFRESH_S."""
        while not stopping.is_set():
            listed: set[Conversation] | None = set()
            try:
                async with asyncio.timeout(INDEX_REFRESH_S):
                    async for mark in self._index.follow():
                        if mark is None:  # every current mark seen: drop what left the index while not watched
                            for gone in set(self.due_at) - (listed or set()):
                                self.due_at.pop(gone, None)
                            listed = None
                        elif mark.since is None:
                            self.due_at.pop((mark.tenant, mark.conversation_id), None)
                        else:
                            conversation = (mark.tenant, mark.conversation_id)
                            self.due_at.setdefault(conversation, mark.since + self._look_after)
                            if listed is not None:
                                listed.add(conversation)
                        metrics.open_conversations.set(len(self.due_at))
            except TimeoutError:
                continue
            except Exception as exc:
                log.warning("following the open index failed (%s: %s); starting over", type(exc).__name__, exc)
                await asyncio.sleep(1.0)
