"""The consolidation schedule: every tenant's jobs once per interval, across all replicas, under its lease.

Time is cut into slots of `interval_s`; a tenant is first consolidated in the slot after the one it was first
seen in (its first entries need no consolidating yet; `<prefix>.<tenant>.consolidate` runs it at once). Each
replica looks often (a fraction of the interval and of the lease TTL) for tenants whose last finished scheduled
run is from an earlier slot, takes the tenant's lease, checks again (another replica may have just finished it),
runs the jobs and records the slot. A replica that dies mid-run leaves the slot unrecorded and its lease to
expire; another replica then runs the tenant again, and since every job is idempotent the result is the same as
one clean run.
"""
import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import get_args

from engram_client.contract import ConsolidateRequest, ConsolidationSummary, EntryKind
from shared.consolidation.lease import Leases
from shared.consolidation.run import Consolidation, consolidate
from shared.runtime import metrics
from shared.store import EntryFilter, Scope

log = logging.getLogger("engram.consolidator")
MIN_TICK_S = 0.1


async def measured(c: Consolidation, tenant: str, request: ConsolidateRequest, trigger: str) -> ConsolidationSummary:
    """One run, counted and timed in metrics (by trigger and outcome)."""
    started = time.perf_counter()
    try:
        summary = await consolidate(c, tenant, request)
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
        for tenant in tenants:
            try:
                last = await self.leases.last_slot(tenant)
                if last < 0:  # a tenant seen for the first time is consolidated from the next slot on
                    await self.leases.finished(tenant, slot)
                    continue
                if last >= slot:
                    continue
                done = await self.leases.run(tenant, lambda t=tenant: self._due(t, slot))  # type: ignore[misc]
            except Exception:  # one tenant's failure must not hold up the others
                log.exception("consolidating tenant %r failed; it is tried again on the next pass", tenant)
                continue
            ran += bool(done)
        if ran:
            await self._count(tenants)
        return ran

    async def _due(self, tenant: str, slot: int) -> bool:
        if await self.leases.last_slot(tenant) >= slot:  # another replica finished it while we took the lease
            return False
        await measured(self.consolidation, tenant, ConsolidateRequest(), "schedule")
        await self.leases.finished(tenant, slot)
        return True

    async def _count(self, tenants: list[str]) -> None:
        store = self.consolidation.store
        everything = 0
        for kind in get_args(EntryKind):
            total = 0
            for tenant in tenants:
                total += await store.count(Scope(tenant_id=tenant), EntryFilter(kinds=[kind]))
            metrics.entries_by_kind.labels(kind).set(total)
            everything += total
        never = 0
        for tenant in tenants:
            never += await store.count(Scope(tenant_id=tenant), EntryFilter(never_recalled=True))
        metrics.never_recalled_ratio.set(never / everything if everything else 0.0)
