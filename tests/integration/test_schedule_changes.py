"""Scheduled runs go over the owners that changed since the last run, and leave the memory a full run leaves."""
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
import pytest

from engram_client.contract import ConsolidateRequest, ConsolidationSummary, Event
from shared.consolidation import run, schedule
from shared.consolidation.lease import Leases
from shared.consolidation.run import Consolidation, consolidate
from shared.embedding import Bm25Encoder
from shared.messaging import nats_server
from shared.settings import Settings
from shared.store import EdgeStore, MemoryEntry, Scope, StoredEntry, Vectors, all_entries, entry_id
from tests.support.ids import unique

MAY = datetime(2024, 5, 6, 10, 0, tzinfo=UTC)
INTERVAL_S = 365 * 86_400.0  # one slot for the whole test: a tenant is due only when the test makes it due


async def _quiet(tenant: str, event: Event) -> None:
    return None


@pytest.fixture
async def scheduler(tmp_path: Path, settings: Settings, bm25: Bm25Encoder) -> AsyncIterator[schedule.Scheduler]:
    """A scheduler over a Qdrant Edge shard and a real nats-server's buckets."""
    server = nats_server.start(tmp_path / "nats")
    nc = await nats.connect(server.url)
    store = EdgeStore.open(tmp_path / "qdrant", 4)
    try:
        leases = await Leases.open(nc.jetstream(), unique("p"), "test", settings.lease_ttl_s)
        yield schedule.Scheduler(Consolidation(store=store, publish=_quiet, sparse=bm25, settings=settings), leases,
                                 INTERVAL_S)
    finally:
        await store.close()
        await nc.close()
        server.stop()


def _entry(bm25: Bm25Encoder, tenant: str, user: str | None, conversation: str, turn: str, text: str, days: int,
           dense: list[float], now: datetime, **fact: Any) -> StoredEntry:
    kind = "fact" if fact else "episodic"
    entry = MemoryEntry(id=entry_id(tenant, conversation, [turn], kind), tenant_id=tenant, user_id=user,
                        conversation_id=conversation, kind=kind, text=text, occurred_at=MAY + timedelta(days=days),
                        created_at=now, updated_at=now, source_turn_ids=[turn], **fact)
    return StoredEntry(entry=entry, vectors=Vectors(dense=dense, sparse=bm25.document(text, "english")))


def _memory(bm25: Bm25Encoder, tenant: str, now: datetime) -> list[StoredEntry]:
    """Two users and a conversation with no user: duplicates to merge, a slot stated twice, small talk."""
    out = []
    for user in ("ana", "bo"):
        out += [_entry(bm25, tenant, user, f"{user}-1", "1", f"{user}: I love hiking in the Alps with my sister.", 0,
                       [1, 0, 0, 0], now),
                _entry(bm25, tenant, user, f"{user}-2", "1", f"{user}: I love hiking in the Alps with my sister.", 3,
                       [1, 0, 0, 0], now),
                _entry(bm25, tenant, user, f"{user}-1", "2", f"{user} lives in Lisbon.", 0, [0, 1, 0, 0], now,
                       subject=user, attribute="lives_in", value="Lisbon", slot_key=f"{user}|lives_in"),
                _entry(bm25, tenant, user, f"{user}-2", "2", f"{user} lives in Porto.", 3, [0, 1, 0.1, 0], now,
                       subject=user, attribute="lives_in", value="Porto", slot_key=f"{user}|lives_in")]
    out.append(_entry(bm25, tenant, None, "lobby", "1", "Guest: haha ok thanks", 0, [0, 0, 1, 0], now))
    return out


def _state(entries: list[MemoryEntry]) -> list[tuple[Any, ...]]:
    return sorted((e.user_id or "", e.conversation_id, e.kind, e.text, e.importance, e.superseded_by is None,
                   e.merged_into is None, tuple(sorted(e.source_turn_ids)), e.value or "") for e in entries)


async def _scheduled(scheduler: schedule.Scheduler, tenant: str) -> None:
    await scheduler.leases.finished(tenant, scheduler.slot() - 1, *_kept(await scheduler.leases.last_run(tenant)))
    assert await scheduler.pass_once() >= 1


def _kept(last: Any) -> tuple[Any, ...]:
    return last.started_at, last.fingerprint, last.full_slot


async def test_a_run_after_a_quiet_slot_goes_over_changed_owners_only_and_ends_as_a_full_run(
        scheduler: schedule.Scheduler, bm25: Bm25Encoder, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a full scheduled run, new entries for one user make the next scheduled run go over that user alone,
    and the tenant ends with the memory a full run over the same entries leaves (a twin tenant run in full)."""
    summaries: list[ConsolidationSummary] = []
    real = schedule.consolidate

    async def recorded(c: Consolidation, tenant: str, request: ConsolidateRequest, now: datetime | None = None,
                       changed_since: tuple[datetime, datetime | None] | None = None) -> ConsolidationSummary:
        summaries.append(await real(c, tenant, request, now, changed_since))
        return summaries[-1]

    monkeypatch.setattr(schedule, "consolidate", recorded)
    # Runs seconds apart, not an interval: the margin for other clocks would take in the run before the last.
    monkeypatch.setattr(schedule, "CLOCK_MARGIN", timedelta(0))
    store = scheduler.consolidation.store
    tenant, twin = unique("t"), unique("t")
    for name in (tenant, twin):
        await store.upsert(_memory(bm25, name, datetime.now(UTC) - timedelta(hours=2)))
    await scheduler.pass_once()  # both first seen: recorded, not run
    await scheduler.leases.finished(twin, scheduler.slot())  # the twin is consolidated on demand below
    await _scheduled(scheduler, tenant)
    assert summaries[-1].owners == 3 and summaries[-1].merged == 2 and summaries[-1].superseded == 2

    now = datetime.now(UTC)
    for name in (tenant, twin):
        await store.upsert([_entry(bm25, name, "bo", "bo-3", "1", "bo lives in Faro.", 6, [0, 1, 0.2, 0], now,
                                   subject="bo", attribute="lives_in", value="Faro", slot_key="bo|lives_in"),
                            _entry(bm25, name, "bo", "bo-3", "2", "bo: I love hiking in the Alps with my sister.", 6,
                                   [1, 0, 0, 0], now)])
    await _scheduled(scheduler, tenant)
    assert summaries[-1].owners == 1 and summaries[-1].merged == 1 and summaries[-1].superseded == 1
    await consolidate(scheduler.consolidation, twin, ConsolidateRequest())
    mine = await all_entries(store, Scope(tenant_id=tenant))
    assert _state(mine) == _state(await all_entries(store, Scope(tenant_id=twin)))

    await _scheduled(scheduler, tenant)  # nothing changed but the last run's own writes, which are no change
    assert summaries[-1].owners == 0


async def test_a_forget_new_settings_or_a_due_full_run_make_the_next_run_go_over_every_owner(
        scheduler: schedule.Scheduler, bm25: Bm25Encoder) -> None:
    """The next run looks for changes only after a recorded full-enough run: `full_next` (what a forget calls),
    another fingerprint, or `full_every_slots` since the last full run make it go over every owner."""
    store, leases = scheduler.consolidation.store, scheduler.leases
    tenant = unique("t")
    await store.upsert(_memory(bm25, tenant, datetime.now(UTC)))
    slot = scheduler.slot()
    started = datetime.now(UTC)
    fingerprint = scheduler.consolidation.fingerprint(tenant)
    await leases.finished(tenant, slot - 1, started, fingerprint, slot - 1)
    last = await leases.last_run(tenant)
    assert scheduler.changed_since(tenant, last, slot) == (started - schedule.CLOCK_MARGIN, started)
    assert scheduler.changed_since(tenant, last, slot - 1 + scheduler.full_every_slots) is None
    other = Consolidation(store=store, publish=_quiet, sparse=bm25,
                          settings=scheduler.consolidation.settings.model_copy(update={"merge_threshold": 0.5}))
    assert other.fingerprint(tenant) != fingerprint
    assert schedule.Scheduler(other, leases, INTERVAL_S).changed_since(tenant, last, slot) is None
    await leases.full_next(tenant)
    assert scheduler.changed_since(tenant, await leases.last_run(tenant), slot) is None
    assert (await leases.last_run(tenant)).slot == slot - 1


def test_a_new_revision_of_the_jobs_rules_is_another_fingerprint(scheduler: schedule.Scheduler,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule that writes something else from the same entries (profiles without endings) comes with a new
    revision, so the first run after a deploy goes over every owner, not only those with something new."""
    before = scheduler.consolidation.fingerprint("t")
    monkeypatch.setattr(run, "RULES", run.RULES + 1)
    assert scheduler.consolidation.fingerprint("t") != before
