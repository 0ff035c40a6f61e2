"""Closing windows: seal idle conversations and write sealed windows as entries, fairly between tenants.

Every replica runs one closer. It writes the windows it sealed at once, and another replica's only after the grace
period (that replica may have died). following.py keeps the open index at hand, batching.py decides what to write in
which batch, and batch.py writes a batch and settles its failures.
"""
import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime, timedelta

from shared.ingest.batch import BatchWriter
from shared.ingest.batching import Conversation, Due, TenantQueues, writable
from shared.ingest.following import OpenConversations
from shared.ingest.policy import CloserPolicy
from shared.ingest.writer import Writer
from shared.messaging.deadletter import TurnDeadLetter
from shared.messaging.events import Publish
from shared.runtime import metrics
from shared.tracing.marks import Marks
from shared.working_memory import WorkingMemory
from shared.working_memory import buffer as buffers
from shared.working_memory.buffer import Buffer

log = logging.getLogger("engram.closer")
MAX_WRITERS = 4  # tenants whose batches are written at once by one replica


class WindowCloser:
    """Writes sealed windows for one replica; any replica may finish another's work."""

    def __init__(self, wm: WorkingMemory, writer: Writer, publish: Publish, dead_letter: TurnDeadLetter,
                 policy: CloserPolicy, marks: Marks | None = None) -> None:
        self.wm = wm
        self.policy = policy
        self.marks = marks or Marks()  # traces: the turns accepted and windows sealed here
        self.open = OpenConversations(wm.index, min(policy.idle_timeout_s, policy.seal_grace_s))
        self.batches = BatchWriter(wm, writer, publish, dead_letter, policy.max_deliver, self._unmark, self.marks)
        self._wake, self._mine = asyncio.Event(), set[Conversation]()  # _mine: sealed here, to write at once

    def notify(self, tenant: str, conversation_id: str) -> None:
        """A window of this conversation was sealed here: write it now rather than after the grace period."""
        self._mine.add((tenant, conversation_id))
        self._wake.set()

    def wake(self) -> None:
        """End the current wait early (a stop, or new work)."""
        self._wake.set()

    async def run(self, stopping: asyncio.Event) -> None:
        """Follow the open index and, until `stopping` is set, write what was sealed here and sweep what is due."""
        follower = asyncio.create_task(self.open.follow(stopping), name="open-index")
        try:
            while not stopping.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=self.policy.sweep_interval_s)
                self._wake.clear()
                try:
                    mine, self._mine = self._mine, set()
                    if mine:
                        await self.write_pending(sorted(mine), min_age_s=0.0)
                    await self.sweep()
                except Exception:  # the loop must survive a broker or store hiccup; the work stays in the KV
                    log.exception("closer pass failed; retrying on the next pass")
        finally:
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)

    async def sweep(self, now: datetime | None = None) -> int:
        """Seal the idle conversations that are due and write every sealed window that is due. Returns how many
        buffers it read (proportional to the conversations with turns waiting, never to all)."""
        now = now or datetime.now(UTC)
        todo: list[Due] = []
        due = self.open.due(now)
        for tenant, conversation_id in due:
            try:
                todo += await self._look_at(tenant, conversation_id, now)
            except Exception:  # one conversation's trouble must not hold up the others
                log.exception("sweeping conversation %r failed; it is looked at again later", conversation_id)
                self.open.look_again((tenant, conversation_id), now + timedelta(seconds=self.policy.sweep_interval_s))
        await self._write_all(todo)
        return len(due)

    async def _look_at(self, tenant: str, conversation_id: str, now: datetime) -> list[Due]:
        """Seal the conversation if idle, unmark it if nothing waits, and say which of its windows to write."""
        buffer = await self._seal_if_idle(tenant, conversation_id, now)
        if buffer is None or not buffer.active:
            await self._unmark(tenant, conversation_id)
            return []
        later = buffers.next_due(buffer, self.policy.idle_timeout_s, self.policy.seal_grace_s)
        self.open.look_again((tenant, conversation_id),
                             max(later or now, now + timedelta(seconds=self.policy.sweep_interval_s)))
        return writable(tenant, conversation_id, buffer, self.batches.retries, now=now, now_s=time.monotonic(),
                        min_age_s=0.0 if (tenant, conversation_id) in self._mine else self.policy.seal_grace_s)

    async def _seal_if_idle(self, tenant: str, conversation_id: str, now: datetime) -> Buffer | None:
        buffer = await self.wm.get(tenant, conversation_id)
        if buffer is None or buffers.seal_idle(buffer, now, self.policy.idle_timeout_s) == buffer:
            return buffer
        sealed, _ = await self.wm.update(tenant, conversation_id, lambda b: (
            buffers.seal_idle(b, now, self.policy.idle_timeout_s) if b else None, None))
        if sealed is not None and len(sealed.sealed) > len(buffer.sealed):
            metrics.windows_sealed_total.labels("idle").inc()
            self.marks.seal(tenant, conversation_id, sealed.sealed[-1].seqs, "idle")
            self._mine.add((tenant, conversation_id))
        return sealed

    async def _unmark(self, tenant: str, conversation_id: str) -> None:
        await self.open.unmark_if_inactive((tenant, conversation_id), lambda: self.wm.get(tenant, conversation_id))
        self._mine.discard((tenant, conversation_id))

    async def write_pending(self, conversations: list[Conversation], min_age_s: float) -> int:
        """Write the sealed windows of these conversations that are at least `min_age_s` old. Returns how many."""
        return await self._write_all(await self._writable_of(conversations, min_age_s))

    async def _writable_of(self, conversations: list[Conversation], min_age_s: float) -> list[Due]:
        now, todo = datetime.now(UTC), list[Due]()
        for tenant, conversation_id in conversations:
            buffer = await self.wm.get(tenant, conversation_id)
            if buffer is not None:
                todo += writable(tenant, conversation_id, buffer, self.batches.retries, now=now,
                                 now_s=time.monotonic(), min_age_s=min_age_s)
        return todo

    async def drain(self, timeout_s: float = 10.0) -> None:
        """On stop: write the windows this replica sealed, for at most `timeout_s`. What cannot be written now
        stays sealed in working memory, where another replica writes it after the grace period (the reason logged)."""
        mine, self._mine = self._mine, set()
        try:
            await asyncio.wait_for(self.write_pending(sorted(mine), min_age_s=0.0), timeout_s)
        except Exception as exc:
            log.warning("windows sealed here were not all written before stopping (%s: %s); another replica "
                        "writes them after %g s", type(exc).__name__, exc, self.policy.seal_grace_s)

    async def _write_all(self, todo: list[Due]) -> int:
        """Write `todo`, a batch of each waiting tenant side by side (at most MAX_WRITERS tenants at once), each
        tenant's batches one after another in order. Windows sealed here meanwhile join at once, behind their own
        tenant's (their conversations are read then; the queue is not read again)."""
        queues, writing, written = TenantQueues(), dict[str, asyncio.Task[int]](), 0
        queues.add(todo)
        while queues or writing:
            for tenant in queues.waiting():
                if tenant not in writing and len(writing) < MAX_WRITERS:
                    writing[tenant] = asyncio.create_task(self._write_batch(queues, queues.take(tenant)))
            woken = asyncio.create_task(self._wake.wait())
            await asyncio.wait([*writing.values(), woken], return_when=asyncio.FIRST_COMPLETED)
            woken.cancel()
            for tenant, task in list(writing.items()):
                if task.done():
                    written += task.result()
                    del writing[tenant]
            if woken.done() and not woken.cancelled():
                self._wake.clear()  # a stop is the run loop's flag to see, not this wait's
            if self._mine:
                newcomers, self._mine = sorted(self._mine), set()
                queues.add(await self._writable_of(newcomers, 0.0))
        return written

    async def _write_batch(self, queues: TenantQueues, batch: list[Due]) -> int:
        """Write one tenant's batch; a failure to finish it leaves its windows sealed, to be written later."""
        try:
            return await self.batches.write(batch)
        except Exception:  # e.g. NATS went away after the entries were stored: the windows stay sealed
            log.exception("finishing %d written windows failed; they are written again later", len(batch))
            return 0
        finally:
            queues.done(batch)
