"""Writing a batch of sealed windows, and what follows it: events, superseded facts, forget marks, and on failure
the dead-letter settle decision (retry with backoff, or dead-letter the window's turns)."""
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from engram_client.contract import EntryCreated, event_id
from engram_client.contract.failures import error_body
from engram_client.errors import EngramError
from shared.compress import Window
from shared.consolidation.changes import applier
from shared.consolidation.supersede import supersede_slots
from shared.errors import SetAside
from shared.ingest.batching import Due, Retries, isolate, window_key
from shared.ingest.writer import Writer, build, save
from shared.messaging.deadletter import Settle, TurnDeadLetter, settle
from shared.messaging.events import Publish
from shared.runtime import metrics
from shared.store import MemoryEntry, Scope, StoredEntry
from shared.tracing import spans
from shared.tracing.marks import Marks
from shared.working_memory import WorkingMemory, attempts
from shared.working_memory import buffer as buffers
from shared.working_memory.buckets import key as conversation_key
from shared.working_memory.buffer import Buffer, SealedWindow

log = logging.getLogger("engram.closer")

TurnKey = tuple[str, str, str]  # (tenant, conversation id, turn id)


def _attempt_key(due: Due) -> str:
    tenant, conversation_id, sealed = due
    return attempts.window_key(conversation_key(tenant, conversation_id), sealed.seqs[0])


async def complete(wm: WorkingMemory, tenant: str, conversation_id: str, sealed: SealedWindow) -> Buffer | None:
    """Take a written (or dead-lettered) window out of its conversation's buffer; returns the buffer after."""
    after, _ = await wm.update(tenant, conversation_id, lambda b: (
        buffers.complete(b, sealed.seqs) if b else None, None))
    return after


@dataclass
class BatchWriter:
    """Writes batches of sealed windows for one replica's closer."""

    wm: WorkingMemory
    writer: Writer
    publish: Publish
    dead_letter: TurnDeadLetter
    max_deliver: int  # failed attempts at writing a window before its turns are dead-lettered
    finished: Callable[[str, str], Awaitable[None]]  # a conversation has nothing waiting after a window's end
    marks: Marks = field(default_factory=Marks)  # traces: the seal of each window
    retries: Retries = field(default_factory=Retries)

    async def write(self, batch: list[Due]) -> int:
        """Write the batch; returns how many windows were written or dead-lettered (a failure leaves the others
        sealed, backing off).

        Each window's attempt is counted in working memory before it begins and forgotten when it ends, so an
        attempt the process did not survive (it died or hung) is known to every replica: a batch holding such a window
        is written a window at a time, to find it; a window cut short more than `max_deliver` times is stored as
        plain lines (no compressor, no fact rules), and past twice that its turns are dead-lettered.
        """
        # Traces: a child of the first window's seal (so of the message that sealed it), linked to the others'.
        seals = [self.marks.seal_of(tenant, conversation_id, w.seqs) for tenant, conversation_id, w in batch]
        with spans.span("engram.window write", parent=seals[0], links=[s for s in seals[1:] if s is not None],
                        attributes={"engram.windows": len(batch)}):
            counts = [await self.wm.attempts.begin(_attempt_key(due)) for due in batch]
            if all(n == 1 for n in counts):
                try:
                    return await self._write(batch)
                finally:
                    await self._end(batch)
            written = 0
            for due, n in zip(batch, counts, strict=True):
                try:
                    if n > 2 * self.max_deliver:
                        written += await self._set_aside(due, n)
                    else:
                        if n > self.max_deliver:
                            metrics.poison_total.labels("window_plain").inc()
                            log.warning("writing a window of conversation %r was cut short %d times: it is stored "
                                        "as plain lines", due[1], n - 1)
                        written += await self._write([due], plain=n > self.max_deliver)
                finally:
                    await self._end([due])
            return written

    async def _end(self, batch: list[Due]) -> None:
        for due in batch:
            await self.wm.attempts.end(_attempt_key(due))

    async def _set_aside(self, due: Due, attempts: int) -> int:
        """Dead-letter the turns of a window whose writing the process did not survive, even as plain lines."""
        tenant, conversation_id, sealed = due
        why = error_body(SetAside(f"writing this window was cut short {attempts - 1} times (the ingestor died or "
                                     "hung), also as plain lines: its turns are set aside"))
        texts = await self.wm.turns(tenant, conversation_id, sealed.seqs)
        for seq in sealed.seqs:
            if seq in texts:
                await self.dead_letter(tenant, texts[seq], why, attempts)
        metrics.poison_total.labels("window_dead_lettered").inc()
        log.error("dead-lettered the %d turns of a window of conversation %r: writing it was cut short %d times",
                  len(texts), conversation_id, attempts - 1)
        await self._complete(tenant, conversation_id, sealed)
        return 1

    async def _write(self, batch: list[Due], plain: bool = False) -> int:
        started = time.perf_counter()
        turns: dict[TurnKey, tuple[int, str | None]] = {}
        windows = [await self._window(tenant, conversation_id, sealed, turns)
                   for tenant, conversation_id, sealed in batch]
        try:
            built = await build(self.writer, [w for w in windows if w is not None], plain=plain)
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
        See shared/working_memory/forgotten.py."""
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
        after = await complete(self.wm, tenant, conversation_id, sealed)
        self.retries.done((tenant, conversation_id, tuple(sealed.seqs)))
        self.marks.written(tenant, conversation_id, sealed.seqs)  # a window retried later keeps its trace
        if after is None or not after.active:
            await self.finished(tenant, conversation_id)

    async def _failed(self, batch: list[Due], exc: Exception) -> int:
        body = error_body(exc)
        metrics.window_failures_total.labels(body.code).inc()
        if isolate(batch, isinstance(exc, EngramError) and exc.retryable, self.retries):
            return sum([await self._write([one]) for one in batch])
        log.warning("writing %d windows failed (%s: %s); will retry", len(batch), body.code, body.message,
                    exc_info=body.code == "internal")
        given_up = 0
        for due in batch:
            attempts = self.retries.failed(window_key(due), time.monotonic())
            if settle(exc, attempts, self.max_deliver, accepted=True) is Settle.RETRY:
                continue
            tenant, conversation_id, sealed = due
            texts = await self.wm.turns(tenant, conversation_id, sealed.seqs)
            for seq in sealed.seqs:
                if seq in texts:
                    await self.dead_letter(tenant, texts[seq], body, attempts)
            log.error("dead-lettered the %d turns of a window of conversation %r after %d failed writes: %s",
                      len(texts), conversation_id, attempts, body.message)
            await self._complete(tenant, conversation_id, sealed)
            given_up += 1
        return given_up
