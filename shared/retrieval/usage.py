"""Use of entries, recorded cheaply: recall hits are counted in memory and written to the entries in batches.

Retention rewards entries people's recalls keep returning (`access_count`, `last_accessed_at`). Counting costs a
dictionary update per hit; every `flush_s` the counts are added to the stored entries, one payload update per
entry hit in the meantime. Counts are approximate by design: two retrievers flushing the same entry at the same
moment may lose one batch's increments, and a retriever that stops without flushing loses its last batch.
"""
import asyncio
import contextlib
import logging
from collections import Counter
from datetime import UTC, datetime

from shared.runtime import metrics
from shared.store import Scope, Store

log = logging.getLogger("engram.usage")
MAX_PENDING = 100_000  # entries counted between flushes; past it, hits are dropped (and the drop logged)


class UsageRecorder:
    """Counts recall hits per entry and adds them to the stored entries in batches."""

    def __init__(self, store: Store, flush_s: float) -> None:
        self._store, self._flush_s = store, flush_s
        self._hits: Counter[tuple[str, str]] = Counter()
        self._dropped = 0

    def record(self, tenant: str, entry_ids: list[str]) -> None:
        """Count one hit for each entry a recall returned."""
        for entry_id in entry_ids:
            if len(self._hits) >= MAX_PENDING and (tenant, entry_id) not in self._hits:
                self._dropped += 1
                continue
            self._hits[(tenant, entry_id)] += 1

    async def flush(self, now: datetime | None = None) -> int:
        """Add the counted hits to the stored entries; returns how many entries were updated."""
        hits, self._hits = self._hits, Counter()
        if self._dropped:
            log.warning("dropped %d recall hits: more than %d entries hit between flushes", self._dropped,
                        MAX_PENDING)
            self._dropped = 0
        when = (now or datetime.now(UTC)).isoformat()
        by_tenant: dict[str, dict[str, int]] = {}
        for (tenant, entry_id), count in hits.items():
            by_tenant.setdefault(tenant, {})[entry_id] = count
        updated = 0
        for tenant, counts in by_tenant.items():
            scope = Scope(tenant_id=tenant)
            for entry in await self._store.get(scope, list(counts)):  # gone meanwhile (forgotten): skipped
                await self._store.set_payload(scope, [entry.id], {
                    "access_count": entry.access_count + counts[entry.id], "last_accessed_at": when})
                updated += 1
        metrics.recall_hits_recorded_total.inc(sum(hits.values()))
        return updated

    async def run(self, stopping: asyncio.Event) -> None:
        """Flush every `flush_s` until `stopping` is set, then once more."""
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self._flush_s)
            try:
                await self.flush()
            except Exception as exc:  # the counts of this batch are lost; recall itself is unaffected
                log.warning("recording recall hits failed (%s: %s)", type(exc).__name__, exc)
