"""Closing windows: follow the open index, seal idle conversations, and write sealed windows as entries.

Every replica runs one closer. It writes the windows it sealed at once, and another replica's only after the grace
period (that replica may have died). A failed write keeps the window sealed and is retried with backoff; a window
that fails `max_deliver` times for a reason retrying cannot fix has its turns dead-lettered, so it never blocks
its conversation for good.

Tenants share the writer fairly: the windows waiting are written in batches that take from each tenant in turn, and
a tenant whose window is sealed while others' backlog is being written joins from the next batch on. So one tenant's
flood of windows delays another tenant's by about a batch, not by the whole backlog.
"""
import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from engram_client.contract import EntryCreated, event_id
from engram_client.contract.failures import error_body
from engram_client.errors import EngramError
from shared.compress import Window
from shared.consolidation.changes import applier
from shared.consolidation.supersede import supersede_slots
from shared.ingest.policy import CloserPolicy
from shared.ingest.writer import Writer, build, save
from shared.messaging.deadletter import TurnDeadLetter
from shared.messaging.events import Publish
from shared.runtime import metrics
from shared.store import MemoryEntry, Scope, StoredEntry
from shared.tracing import spans
from shared.tracing.marks import Marks
from shared.working_memory import WorkingMemory
from shared.working_memory import buffer as buffers
from shared.working_memory.buffer import Buffer, SealedWindow

log = logging.getLogger("engram.closer")

MAX_BATCH_WINDOWS = 16   # windows compressed and embedded together
MAX_BACKOFF_S = 60.0
INDEX_REFRESH_S = 300.0  # the open-index watch is started over this often (and after any error)
Conversation = tuple[str, str]                # (tenant, conversation id)
Due = tuple[str, str, SealedWindow]           # a window to write
WindowKey = tuple[str, str, tuple[int, ...]]  # (tenant, conversation id, its turns' sequences)
TurnKey = tuple[str, str, str]                # (tenant, conversation id, turn id)


def interleaved(todo: list[Due]) -> list[Due]:
    """`todo` reordered to take one window from each tenant in turn (round robin; each tenant's windows keep their
    order, and tenants come in the order they first appear)."""
    by_tenant: dict[str, list[Due]] = {}
    for due in todo:
        by_tenant.setdefault(due[0], []).append(due)
    rounds = max((len(windows) for windows in by_tenant.values()), default=0)
    return [windows[i] for i in range(rounds) for windows in by_tenant.values() if i < len(windows)]


@dataclass
class _Backoff:
    attempts: int = 0
    next_at: float = 0.0


@dataclass
class WindowCloser:
    """Writes sealed windows for one replica; any replica may finish another's work."""

    wm: WorkingMemory
    writer: Writer
    publish: Publish
    dead_letter: TurnDeadLetter
    policy: CloserPolicy
    marks: Marks = field(default_factory=Marks)  # traces: the turns accepted and windows sealed here
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _mine: set[Conversation] = field(default_factory=set)
    _due: dict[Conversation, datetime] = field(default_factory=dict)  # the open index: when to look next
    _backoff: dict[WindowKey, _Backoff] = field(default_factory=dict)

    def notify(self, tenant: str, conversation_id: str) -> None:
        """A window of this conversation was sealed here: write it now rather than after the grace period."""
        self._mine.add((tenant, conversation_id))
        self._wake.set()

    def wake(self) -> None:
        """End the current wait early (a stop, or new work)."""
        self._wake.set()

    async def run(self, stopping: asyncio.Event) -> None:
        """Follow the open index and, until `stopping` is set, write what was sealed here and sweep what is due."""
        follower = asyncio.create_task(self._follow(stopping), name="open-index")
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

    async def _follow(self, stopping: asyncio.Event) -> None:
        """Keep `_due` equal to the open index, starting the watch over after an error and every INDEX_REFRESH_S."""
        look_after = timedelta(seconds=min(self.policy.idle_timeout_s, self.policy.seal_grace_s))
        while not stopping.is_set():
            listed: set[Conversation] | None = set()
            try:
                async with asyncio.timeout(INDEX_REFRESH_S):
                    async for mark in self.wm.index.follow():
                        if mark is None:  # every current mark seen: drop what left the index while not watched
                            for gone in set(self._due) - (listed or set()):
                                self._due.pop(gone, None)
                            listed = None
                        elif mark.since is None:
                            self._due.pop((mark.tenant, mark.conversation_id), None)
                        else:
                            conversation = (mark.tenant, mark.conversation_id)
                            self._due.setdefault(conversation, mark.since + look_after)
                            if listed is not None:
                                listed.add(conversation)
                        metrics.open_conversations.set(len(self._due))
            except TimeoutError:
                continue
            except Exception as exc:
                log.warning("following the open index failed (%s: %s); starting over", type(exc).__name__, exc)
                await asyncio.sleep(1.0)

    async def sweep(self, now: datetime | None = None) -> int:
        """Seal the idle conversations that are due and write every sealed window that is due. Returns how many
        buffers it read (proportional to the conversations with turns waiting, never to all)."""
        now = now or datetime.now(UTC)
        todo: list[Due] = []
        due = [c for c, at in self._due.items() if at <= now]
        for tenant, conversation_id in due:
            try:
                todo += await self._look_at(tenant, conversation_id, now)
            except Exception:  # one conversation's trouble must not hold up the others
                log.exception("sweeping conversation %r failed; it is looked at again later", conversation_id)
                self._due[(tenant, conversation_id)] = now + timedelta(seconds=self.policy.sweep_interval_s)
        await self._write_all(todo)
        return len(due)

    async def _look_at(self, tenant: str, conversation_id: str, now: datetime) -> list[Due]:
        """Seal the conversation if idle, unmark it if nothing waits, and say which of its windows to write."""
        buffer = await self._seal_if_idle(tenant, conversation_id, now)
        if buffer is None or not buffer.active:
            await self._unmark(tenant, conversation_id)
            return []
        mine = (tenant, conversation_id) in self._mine
        later = buffers.next_due(buffer, self.policy.idle_timeout_s, self.policy.seal_grace_s)
        self._due[(tenant, conversation_id)] = max(later or now, now + timedelta(seconds=self.policy.sweep_interval_s))
        return self._writable(tenant, conversation_id, buffer, now, 0.0 if mine else self.policy.seal_grace_s)

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
        conversation = (tenant, conversation_id)
        known = self._due.get(conversation)
        unmarked = await self.wm.index.unmark_if_inactive(tenant, conversation_id,
                                                          lambda: self.wm.get(tenant, conversation_id))
        # Forget it here unless the watch re-added it meanwhile (marked again after the purge).
        if unmarked and self._due.get(conversation) is known:
            self._due.pop(conversation, None)
        self._mine.discard(conversation)

    def _writable(self, tenant: str, conversation_id: str, buffer: Buffer, now: datetime,
                  min_age_s: float) -> list[Due]:
        """The sealed windows old enough to write and not backing off; forgets backoff of windows now gone."""
        sealed = {tuple(w.seqs) for w in buffer.sealed}
        for gone in [k for k in self._backoff if k[:2] == (tenant, conversation_id) and k[2] not in sealed]:
            del self._backoff[gone]  # written by another replica meanwhile
        out = []
        for window in buffer.sealed:
            backoff = self._backoff.get((tenant, conversation_id, tuple(window.seqs)))
            if backoff and backoff.next_at > time.monotonic():
                continue
            if (now - window.sealed_at).total_seconds() >= min_age_s:
                out.append((tenant, conversation_id, window))
        return out

    async def write_pending(self, conversations: list[Conversation], min_age_s: float) -> int:
        """Write the sealed windows of these conversations that are at least `min_age_s` old. Returns how many."""
        return await self._write_all(await self._writable_of(conversations, min_age_s))

    async def _writable_of(self, conversations: list[Conversation], min_age_s: float) -> list[Due]:
        now = datetime.now(UTC)
        todo: list[Due] = []
        for tenant, conversation_id in conversations:
            buffer = await self.wm.get(tenant, conversation_id)
            if buffer is not None:
                todo += self._writable(tenant, conversation_id, buffer, now, min_age_s)
        return todo

    async def drain(self, timeout_s: float = 10.0) -> None:
        """On stop: write the windows this replica sealed, for at most `timeout_s`.

        What cannot be written now stays sealed in working memory, where another replica writes it after the grace
        period; the reason is logged, never swallowed.
        """
        mine, self._mine = self._mine, set()
        try:
            await asyncio.wait_for(self.write_pending(sorted(mine), min_age_s=0.0), timeout_s)
        except Exception as exc:
            log.warning("windows sealed here were not all written before stopping (%s: %s); another replica "
                        "writes them after %g s", type(exc).__name__, exc, self.policy.seal_grace_s)

    async def _write_all(self, todo: list[Due]) -> int:
        """Write `todo` in batches that take from each tenant in turn. A tenant with nothing in the queue whose
        window is sealed here meanwhile joins it after the batch (its conversations are read then, the queue is not
        read again), so it is written in the next batch, not after the whole backlog."""
        written = 0
        queue = interleaved(todo)
        while queue:
            batch, queue = queue[:MAX_BATCH_WINDOWS], queue[MAX_BATCH_WINDOWS:]
            try:
                written += await self._write(batch)
            except Exception:  # e.g. NATS went away after the entries were stored: the windows stay sealed
                log.exception("finishing %d written windows failed; they are written again later", len(batch))
            waiting = {tenant for tenant, _, _ in queue}
            newcomers = sorted(c for c in self._mine if c[0] not in waiting)
            if queue and newcomers:
                self._mine.difference_update(newcomers)
                queue = interleaved(await self._writable_of(newcomers, 0.0) + queue)
        return written

    async def _write(self, batch: list[Due]) -> int:
        # Traces: a child of the first window's seal (so of the message that sealed it), linked to the others'.
        seals = [self.marks.seal_of(tenant, conversation_id, w.seqs) for tenant, conversation_id, w in batch]
        with spans.span("engram.window write", parent=seals[0], links=[s for s in seals[1:] if s is not None],
                        attributes={"engram.windows": len(batch)}):
            return await self._write_batch(batch)

    async def _write_batch(self, batch: list[Due]) -> int:
        started = time.perf_counter()
        turns: dict[TurnKey, tuple[int, str | None]] = {}
        windows = [await self._window(tenant, conversation_id, sealed, turns)
                   for tenant, conversation_id, sealed in batch]
        try:
            built = await build(self.writer, [w for w in windows if w is not None])
            await save(self.writer, built)
            items = await self._unless_forgotten(built.items, turns)
        except Exception as exc:  # keep the windows sealed; back off and try again
            return await self._failed(batch, exc)
        metrics.write_seconds.observe(time.perf_counter() - started)
        metrics.entries_written_total.inc(len(items))
        emitted = datetime.now(UTC)
        for item in items:  # published before the windows are marked done: at least once, with a stable id
            entry = item.entry
            await self.publish(entry.tenant_id, EntryCreated(
                event_id=event_id("entry_created", entry.id), tenant_id=entry.tenant_id, emitted_at=emitted,
                entry_id=entry.id, conversation_id=entry.conversation_id, user_id=entry.user_id,
                source_turn_ids=entry.source_turn_ids, occurred_at=entry.occurred_at))
        await self._supersede([i.entry for i in items if i.entry.slot_key], emitted)
        for tenant, conversation_id, sealed in batch:
            await self._complete(tenant, conversation_id, sealed)
            metrics.window_end_to_end_seconds.observe((datetime.now(UTC) - sealed.sealed_at).total_seconds())
        metrics.windows_written_total.inc(len(batch))
        return len(batch)

    async def _unless_forgotten(self, items: list[StoredEntry],
                                turns: dict[TurnKey, tuple[int, str | None]]) -> list[StoredEntry]:
        """Delete the entries just saved that hold a turn a forget covers (its user's or its conversation's mark
        is at or after the turn's sequence: the forget ran while the window was being written); returns the others.
        A window the forget changed (a user's turns taken out) stays sealed in its new form and is written again.
        See forgotten.py."""
        marks: dict[tuple[str, str, str | None], int] = {}
        gone: set[str] = set()
        for item in items:
            entry = item.entry
            for turn_id in entry.source_turn_ids:
                found = turns.get((entry.tenant_id, entry.conversation_id, turn_id))
                if found is None:
                    continue
                seq, user_id = found
                key = (entry.tenant_id, entry.conversation_id, user_id)
                if key not in marks:
                    marks[key] = await self.wm.forgotten.through(*key)
                if seq <= marks[key]:
                    gone.add(entry.id)
                    break
        for tenant in sorted({item.entry.tenant_id for item in items if item.entry.id in gone}):
            ids = [item.entry.id for item in items if item.entry.id in gone and item.entry.tenant_id == tenant]
            await self.writer.store.delete(Scope(tenant_id=tenant), ids)
            log.info("deleted %d entries written while a turn of theirs was forgotten", len(ids))
        return [item for item in items if item.entry.id not in gone]

    async def _supersede(self, facts: list[MemoryEntry], now: datetime) -> None:
        """Bring the chains of the slots these new facts state up to date now, so recall is right at once (the
        consolidator's supersede job would otherwise do it on its next run, and still checks every slot)."""
        by_scope: dict[Scope, set[str]] = {}
        for fact in facts:
            scope = Scope(tenant_id=fact.tenant_id, user_id=fact.user_id,
                          conversation_id=fact.conversation_id if fact.user_id is None else None)
            by_scope.setdefault(scope, set()).add(fact.slot_key or "")
        apply = applier(self.writer.store, self.publish, now)
        for scope, keys in by_scope.items():
            try:
                await supersede_slots(self.writer.store, scope, sorted(keys), apply)
            except Exception as exc:  # the facts are stored; the next consolidation puts their chains right
                log.warning("superseding %d slots at write failed (%s: %s); the consolidator will", len(keys),
                            type(exc).__name__, exc)

    async def _window(self, tenant: str, conversation_id: str, sealed: SealedWindow,
                      seen: dict[TurnKey, tuple[int, str | None]]) -> Window | None:
        """The window's turns from working memory (each also noted in `seen` with its sequence and user)."""
        wanted = [*sealed.seqs, *([sealed.context] if sealed.context is not None else [])]
        texts = await self.wm.turns(tenant, conversation_id, wanted)
        turns = [texts[s] for s in sealed.seqs if s in texts]
        seen.update({(tenant, conversation_id, texts[s].turn_id): (s, texts[s].user_id)
                     for s in sealed.seqs if s in texts})
        if len(turns) < len(sealed.seqs):
            current = await self.wm.get(tenant, conversation_id)
            if current is None or sealed not in current.sealed:
                return None  # another replica wrote it meanwhile (and purged its texts): nothing to do
            # Still sealed, texts gone: only a bucket TTL shorter than the window's wait can do this.
            metrics.turns_missing_total.inc(len(sealed.seqs) - len(turns))
            log.error("%d turns of a window of conversation %r were gone from working memory",
                      len(sealed.seqs) - len(turns), conversation_id)
        if not turns:
            return None
        context = [texts[sealed.context]] if sealed.context in texts else []
        return Window(tenant_id=tenant, conversation_id=conversation_id, turns=turns, context=context)

    async def _complete(self, tenant: str, conversation_id: str, sealed: SealedWindow) -> None:
        after, _ = await self.wm.update(tenant, conversation_id, lambda b: (
            buffers.complete(b, sealed.seqs) if b else None, None))
        self._backoff.pop((tenant, conversation_id, tuple(sealed.seqs)), None)
        self.marks.written(tenant, conversation_id, sealed.seqs)  # a window retried later keeps its trace
        if after is None or not after.active:
            await self._unmark(tenant, conversation_id)

    async def _failed(self, batch: list[Due], exc: Exception) -> int:
        body = error_body(exc)
        metrics.window_failures_total.labels(body.code).inc()
        retryable = isinstance(exc, EngramError) and exc.retryable
        # Find the window that fails, so the others are not held back: at once for a failure retrying cannot fix,
        # and for a retryable one once the same windows have failed together twice (a dependency that is down
        # fails them one by one as fast; one that fails on one window alone holds back only that window).
        repeated = all(self._backoff.get((t, c, tuple(w.seqs)), _Backoff()).attempts >= 2 for t, c, w in batch)
        if len(batch) > 1 and (not retryable or repeated):
            return sum([await self._write([one]) for one in batch])
        log.warning("writing %d windows failed (%s: %s); will retry", len(batch), body.code, body.message,
                    exc_info=body.code == "internal")
        written = 0
        for tenant, conversation_id, sealed in batch:
            state = self._backoff.setdefault((tenant, conversation_id, tuple(sealed.seqs)), _Backoff())
            state.attempts += 1
            state.next_at = time.monotonic() + min(MAX_BACKOFF_S, 2.0 ** state.attempts)
            if not retryable and state.attempts >= self.policy.max_deliver:
                texts = await self.wm.turns(tenant, conversation_id, sealed.seqs)
                for seq in sealed.seqs:
                    if seq in texts:
                        await self.dead_letter(tenant, texts[seq], body, state.attempts)
                log.error("dead-lettered the %d turns of a window of conversation %r after %d failed writes: %s",
                          len(texts), conversation_id, state.attempts, body.message)
                await self._complete(tenant, conversation_id, sealed)
                written += 1
        return written
