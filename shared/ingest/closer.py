"""Closing windows: seal idle conversations, then write sealed windows as entries, retrying with backoff."""
import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from shared.compress import Window
from shared.contract import EntryCreated
from shared.contract.failures import code_of
from shared.ingest import buffer as buffers
from shared.ingest.buffer import SealedWindow
from shared.ingest.policy import CloserPolicy
from shared.ingest.working_memory import WorkingMemory
from shared.ingest.writer import Writer, build_entries
from shared.messaging.events import Publish
from shared.runtime import metrics

log = logging.getLogger("engram.closer")


MAX_BATCH_WINDOWS = 16   # windows compressed and embedded together
MAX_BACKOFF_S = 60.0


def _completer(turn_ids: list[str]) -> Callable[[buffers.Buffer], tuple[buffers.Buffer, None]]:
    return lambda b: (buffers.complete(b, turn_ids), None)


@dataclass
class _Backoff:
    attempts: int = 0
    next_at: float = 0.0


@dataclass
class WindowCloser:
    """Writes sealed windows for one replica; every replica runs one, and any may finish another's work."""

    wm: WorkingMemory
    writer: Writer
    publish: Publish
    policy: CloserPolicy
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _mine: set[tuple[str, str]] = field(default_factory=set)
    _backoff: dict[tuple[str, tuple[str, ...]], _Backoff] = field(default_factory=dict)

    def notify(self, tenant: str, conversation_id: str) -> None:
        """A window of this conversation was sealed here: write it now rather than after the grace period."""
        self._mine.add((tenant, conversation_id))
        self._wake.set()

    def wake(self) -> None:
        """End the current wait early (a stop, or new work)."""
        self._wake.set()

    async def run(self, stopping: asyncio.Event | None = None) -> None:
        """Loop until `stopping` is set (or cancelled): write what was sealed here promptly, sweep periodically."""
        last_sweep = 0.0
        stopping = stopping or asyncio.Event()
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.policy.sweep_interval_s)
            self._wake.clear()
            try:
                mine, self._mine = self._mine, set()
                if mine:
                    await self.write_pending(sorted(mine), min_age_s=0.0)
                if time.monotonic() - last_sweep >= self.policy.sweep_interval_s:
                    last_sweep = time.monotonic()
                    await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop must survive a broker or store hiccup; the work stays in the KV
                log.exception("closer pass failed; retrying on the next pass")

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

    async def sweep(self, now: datetime | None = None) -> None:
        """Seal idle conversations, then write every sealed window older than the grace period."""
        now = now or datetime.now(UTC)
        todo: list[tuple[str, str, SealedWindow]] = []
        pending = 0
        mine, self._mine = self._mine, set()
        for tenant, conversation_id in await self.wm.conversations():
            buffer = await self.wm.get(tenant, conversation_id)  # the one read of this buffer in this sweep
            if buffer is None:
                continue
            if buffer.open and buffer.last_turn_at and (
                    (now - buffer.last_turn_at).total_seconds() >= self.policy.idle_timeout_s):
                sealed_before = len(buffer.sealed)
                buffer, _ = await self.wm.update(
                    tenant, conversation_id,
                    lambda b: (buffers.seal_idle(b, now, self.policy.idle_timeout_s), None))
                if len(buffer.sealed) > sealed_before:
                    metrics.windows_sealed_total.labels("idle").inc()
                    mine.add((tenant, conversation_id))
            # What this replica sealed is written now; another replica's work only after the grace period.
            min_age_s = 0.0 if (tenant, conversation_id) in mine else self.policy.seal_grace_s
            pending += len(buffer.sealed)
            todo += self._due(tenant, conversation_id, buffer.sealed, now, min_age_s)
        metrics.pending_windows.set(pending)
        await self._write_all(todo)

    def _due(self, tenant: str, conversation_id: str, sealed: list[SealedWindow], now: datetime,
             min_age_s: float) -> list[tuple[str, str, SealedWindow]]:
        """The sealed windows old enough to write and not backing off after a failure."""
        due = []
        for window in sealed:
            backoff = self._backoff.get((tenant, tuple(window.turn_ids)))
            if backoff and backoff.next_at > time.monotonic():
                continue
            if (now - window.sealed_at).total_seconds() >= min_age_s:
                due.append((tenant, conversation_id, window))
        return due

    async def write_pending(self, conversations: list[tuple[str, str]], min_age_s: float) -> int:
        """Write the sealed windows of these conversations that are at least `min_age_s` old. Returns how many."""
        now = datetime.now(UTC)
        todo: list[tuple[str, str, SealedWindow]] = []
        for tenant, conversation_id in conversations:
            buffer = await self.wm.get(tenant, conversation_id)
            todo += self._due(tenant, conversation_id, buffer.sealed if buffer else [], now, min_age_s)
        return await self._write_all(todo)

    async def _write_all(self, todo: list[tuple[str, str, SealedWindow]]) -> int:
        written = 0
        for start in range(0, len(todo), MAX_BATCH_WINDOWS):
            written += await self._write(todo[start:start + MAX_BATCH_WINDOWS])
        return written

    async def _write(self, batch: list[tuple[str, str, SealedWindow]]) -> int:
        started = time.perf_counter()
        windows = [Window(tenant_id=t, conversation_id=c, turns=[b.turn for b in w.turns], context=w.context)
                   for t, c, w in batch]
        try:
            items = await build_entries(self.writer, windows)
            await self.writer.store.upsert(items)
        except Exception as exc:  # keep the windows sealed; back off and try again
            code = code_of(exc)
            metrics.window_failures_total.labels(code).inc()
            for tenant, _, window in batch:
                state = self._backoff.setdefault((tenant, tuple(window.turn_ids)), _Backoff())
                state.attempts += 1
                state.next_at = time.monotonic() + min(MAX_BACKOFF_S, 2.0 ** state.attempts)
            log.warning("writing %d windows failed (%s); will retry", len(batch), code, exc_info=code == "internal")
            return 0
        metrics.write_seconds.observe(time.perf_counter() - started)
        metrics.entries_written_total.inc(len(items))
        emitted = datetime.now(UTC)
        for item in items:
            entry = item.entry
            await self.publish(entry.tenant_id, EntryCreated(
                tenant_id=entry.tenant_id, emitted_at=emitted, entry_id=entry.id,
                conversation_id=entry.conversation_id, user_id=entry.user_id,
                source_turn_ids=entry.source_turn_ids, occurred_at=entry.occurred_at))
        for tenant, conversation_id, window in batch:
            await self.wm.update(tenant, conversation_id, _completer(window.turn_ids))
            self._backoff.pop((tenant, tuple(window.turn_ids)), None)
        metrics.windows_written_total.inc(len(batch))
        return len(batch)
