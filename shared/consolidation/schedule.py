"""The consolidation schedule: every tenant's jobs once per interval, across all replicas, under its lease.

Time is cut into slots of `interval_s`; a tenant is first consolidated in the slot after the one it was first
seen in (its first entries need no consolidating yet; `<prefix>.<tenant>.consolidate` runs it at once). Each
replica looks often (a fraction of the interval and of the lease TTL) for tenants whose last finished scheduled
run is from an earlier slot, takes the tenant's lease, checks again (another replica may have just finished it),
runs the jobs and records the slot and when the run started. The next scheduled run goes only over the owners
with entries written since then (see `run.changed_owners`); every `full_every_slots`, after a forget, or when
settings or the version changed, it goes over every owner. A replica that dies mid-run leaves the slot unrecorded
and its lease to expire; another replica then runs the tenant again, and since every job is idempotent the result
is the same as one clean run.
"""
import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import get_args

from engram_client.contract import ConsolidateRequest, ConsolidationSummary, EntryKind
from shared.consolidation.lease import LastRun, Leases
from shared.consolidation.run import Consolidation, consolidate
from shared.runtime import metrics
from shared.store import EntryFilter

log = logging.getLogger("engram.consolidator")
MIN_TICK_S = 0.1
FULL_EVERY_SLOTS = 24  # a scheduled run over every owner at least this often (a day at the default interval)
# Entries are stamped by other processes' clocks, and an ingestor stamps a window's entries before it writes them:
# a run looks for changes from this long before the last run started.
CLOCK_MARGIN = timedelta(minutes=15)


async def measured(c: Consolidation, tenant: str, request: ConsolidateRequest, trigger: str,
                   now: datetime | None = None,
                   changed_since: tuple[datetime, datetime | None] | None = None) -> ConsolidationSummary:
    """One run, counted and timed in metrics (by trigger and outcome); see `consolidate` for the rest."""
    started = time.perf_counter()
    try:
        summary = await consolidate(c, tenant, request, now, changed_since)
    except BaseException:
        metrics.consolidation_runs_total.labels(trigger, "error").inc()
        raise
    metrics.consolidation_seconds.observe(time.perf_counter() - started)
    metrics.consolidation_runs_total.labels(trigger, "ok").inc()
    metrics.consolidation_last_success.set(time.time())
    log.info("consolidated tenant=%s trigger=%s owners=%d superseded=%d merged=%d forgotten=%d profiles=%d "
             "duration_ms=%.0f", tenant, trigger, summary.owners, summary.superseded, summary.merged,
             summary.forgotten, summary.profiles_updated, summary.duration_ms)
    return summary


@dataclass(frozen=True)
class Scheduler:
    """Runs every tenant's consolidation once per interval, whichever replica gets to it first."""

    consolidation: Consolidation
    leases: Leases
    interval_s: float
    full_every_slots: int = FULL_EVERY_SLOTS

    @property
    def tick_s(self) -> float:
        """How often this replica looks for due tenants."""
        return max(MIN_TICK_S, min(self.interval_s / 4, self.leases.ttl_s / 3))

    def slot(self, now: datetime | None = None) -> int:
        """The current schedule slot."""
        return int((now or datetime.now(UTC)).timestamp() // self.interval_s)

    async def run(self, stopping: asyncio.Event) -> None:
        """Until `stopping` is set: look for due tenants and consolidate them."""
        while not stopping.is_set():
            try:
                await self.pass_once()
            except Exception:  # the schedule must outlive a broker or store hiccup
                log.exception("consolidation pass failed; trying again in %.1f s", self.tick_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.tick_s)

    async def pass_once(self) -> int:
        """Consolidate the tenants due in this slot that no other replica holds; returns how many ran here."""
        slot = self.slot()
        ran = 0
        tenants = await self.consolidation.store.tenants()
        runs = await self.leases.last_runs()
        for tenant in tenants:
            try:
                record = runs.get(tenant, LastRun(slot=-1))
                last = record.slot
                if last < 0:  # seen for the first time, or its record did not parse: it runs from the next slot on
                    await self.leases.first_seen(tenant, slot, over_unreadable=record.unreadable)
                    continue
                if last >= slot:
                    continue
                done = await self.leases.run(tenant, lambda t=tenant: self._due(t, slot))  # type: ignore[misc]
            except Exception:  # one tenant's failure must not hold up the others
                log.exception("consolidating tenant %r failed; it is tried again on the next pass", tenant)
                continue
            ran += bool(done)
        if ran:
            await self._count()
        return ran

    def changed_since(self, tenant: str, last: LastRun, slot: int) -> tuple[datetime, datetime] | None:
        """Where the run of `slot` looks for changes from, and the last run's own stamp; None: it goes over every
        owner (the first run, a forget since the last, other settings or another version, the model judging
        facts, or a full run due)."""
        c = self.consolidation
        if (not c.incremental or last.started_at is None or last.fingerprint != c.fingerprint(tenant)
                or slot - last.full_slot >= self.full_every_slots):
            return None
        return last.started_at - CLOCK_MARGIN, last.started_at

    async def _due(self, tenant: str, slot: int) -> bool:
        last = await self.leases.last_run(tenant)
        if last.slot >= slot:  # another replica finished it while we took the lease
            return False
        started = datetime.now(UTC)
        since = self.changed_since(tenant, last, slot)
        await measured(self.consolidation, tenant, ConsolidateRequest(), "schedule", started, since)
        await self.leases.finished(tenant, slot, started, self.consolidation.fingerprint(tenant),
                                   slot if since is None else last.full_slot)
        return True

    async def _count(self) -> None:
        # Counted from the kind index across the store, in two reads, not two per tenant.
        store = self.consolidation.store
        counts = await store.kind_counts()
        for kind in get_args(EntryKind):
            metrics.entries_by_kind.labels(kind).set(counts.get(kind, 0))
        everything = sum(counts.get(kind, 0) for kind in get_args(EntryKind))
        never = sum((await store.kind_counts(EntryFilter(never_recalled=True))).values())
        metrics.never_recalled_ratio.set(never / everything if everything else 0.0)
