"""One consolidation run for a tenant: score, supersede, merge, forget by retention, profile, owner by owner.

An owner is a user (their entries from every conversation), or a conversation for entries that name no user.
Every job reads what it needs just before it writes, writes only what differs, and decides from the stored data
and `now` alone, so a run is idempotent and may be interrupted anywhere: the next run finishes the work.
"""
import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from engram_client.contract import ConsolidateRequest, ConsolidationJob, ConsolidationSummary, check_tenant
from shared.consolidation import importance, merge, outdated, profile, retention, same_fact
from shared.consolidation.changes import Change, Changes, applier
from shared.consolidation.forget import erase
from shared.consolidation.supersede import supersede_slots
from shared.embedding import Bm25Encoder
from shared.llm import LlmClient
from shared.messaging.events import Publish
from shared.runtime import metrics
from shared.settings import Settings
from shared.store import EntryFilter, MemoryEntry, Scope, Store, all_entries, pages

ALL_JOBS: tuple[ConsolidationJob, ...] = ("score", "supersede", "merge", "forget", "profile")


@dataclass(frozen=True)
class Consolidation:
    """What the jobs need: the store, where to announce changes, BM25 for profiles, and the settings."""

    store: Store
    publish: Publish
    sparse: Bm25Encoder
    settings: Settings
    llm: LlmClient | None = None  # asked which facts state the same (when settings.llm_consolidate)

    def policy(self, tenant: str) -> retention.Policy:
        """The retention policy of one tenant."""
        s = self.settings
        return retention.Policy(half_life_days=s.half_life_days, min_score=s.retention_min_score,
                                ttl_days=s.retention_ttl_days_by_tenant.get(tenant, s.retention_ttl_days),
                                max_entries=s.max_entries_per_user)


@dataclass(frozen=True)
class Owner:
    """Whose memory a job works on: a user, or the entries of a conversation that name no user."""

    tenant: str
    user_id: str | None
    conversation_id: str | None

    @property
    def scope(self) -> Scope:
        """The store scope holding the owner's entries (and, for a conversation, maybe others': see `owns`)."""
        if self.user_id is not None:
            return Scope(tenant_id=self.tenant, user_id=self.user_id)
        return Scope(tenant_id=self.tenant, conversation_id=self.conversation_id)

    def owns(self, entry: MemoryEntry) -> bool:
        """Whether the entry is this owner's."""
        return self.user_id is not None or entry.user_id is None


async def read_all(store: Store, owner: Owner, entry_filter: EntryFilter | None = None,
                   with_vectors: bool = False) -> list[tuple[MemoryEntry, list[float]]]:
    """Every entry of the owner matching the filter, with its dense vector when asked."""
    out: list[tuple[MemoryEntry, list[float]]] = []
    async for page in pages(store, owner.scope, entry_filter, with_vectors=with_vectors):
        dense = page.dense or [[] for _ in page.entries]
        out += [(e, d) for e, d in zip(page.entries, dense, strict=True) if owner.owns(e)]
    return out


def owners(tenant: str, entries: Iterable[MemoryEntry]) -> list[Owner]:
    """Every owner among these entries, users first, in a stable order."""
    users = sorted({e.user_id for e in entries if e.user_id is not None})
    conversations = sorted({e.conversation_id for e in entries if e.user_id is None})
    return [Owner(tenant, u, None) for u in users] + [Owner(tenant, None, c) for c in conversations]


async def _score(c: Consolidation, owner: Owner, apply: Changes) -> int:
    todo = [Change(entry=e, payload={"importance": score}) for e, _ in await read_all(c.store, owner)
            if (score := importance.importance(e)) != e.importance]
    await apply(owner.tenant, todo)
    return len(todo)


async def _supersede(c: Consolidation, owner: Owner, apply: Changes) -> int:
    if c.llm is not None and c.settings.llm_consolidate:
        active = EntryFilter(kinds=["fact"], include_superseded=False, include_merged=False)
        found = await read_all(c.store, owner, active, with_vectors=True)
        await apply(owner.tenant, await same_fact.judge(c.llm, owner.tenant, [
            same_fact.Candidate(entry=e, dense=d) for e, d in found if d]))
    facts = await read_all(c.store, owner, EntryFilter(kinds=["fact"]))
    return await supersede_slots(c.store, owner.scope, [f.slot_key for f, _ in facts if f.slot_key], apply)


async def _outdate(c: Consolidation, owner: Owner, apply: Changes) -> None:
    """Mark the owner's active facts that a newer episode about the same thing may have outdated (or unmark)."""
    active = EntryFilter(kinds=["fact"], include_superseded=False, include_merged=False)
    facts = [outdated.Item(e, d) for e, d in await read_all(c.store, owner, active, with_vectors=True)]
    await apply(owner.tenant, await outdated.changes(c.store, owner.scope, facts, c.sparse,
                                                     c.settings.outdated_band, c.settings.rrf_k))


async def _merge(c: Consolidation, owner: Owner, apply: Changes) -> int:
    episodes = await read_all(c.store, owner, EntryFilter(kinds=["episodic"]), with_vectors=True)
    candidates = [merge.Candidate(entry=e, dense=d) for e, d in episodes if e.superseded_by is None and d]
    # On a worker thread: a big owner's similarity matrix must not hold up the lease's renewal (or recalls).
    todo = await asyncio.to_thread(merge.changes, candidates, c.settings.merge_threshold,
                                   c.settings.merge_min_overlap)
    await apply(owner.tenant, todo)
    return sum(1 for t in todo if t.payload.get("merged_into") and not t.entry.merged_into)


async def _forget(c: Consolidation, owner: Owner, now: datetime) -> int:
    entries = [e for e, _ in await read_all(c.store, owner)]
    gone = retention.to_forget(entries, c.policy(owner.tenant), now)
    for reason in sorted(set(gone.values())):
        ids = sorted(i for i, r in gone.items() if r == reason)
        await erase(c.store, c.publish, Scope(tenant_id=owner.tenant), ids, reason)
        metrics.consolidation_forgotten_total.labels(reason).inc(len(ids))
    return len(gone)


async def _profile(c: Consolidation, owner: Owner, now: datetime) -> int:
    if owner.user_id is None:
        return 0
    current = EntryFilter(kinds=["fact"], include_superseded=False, include_merged=False)
    # Facts, and statements the model put in a slot (the slot's current word when newer than its facts).
    facts = [(f, d) for f, d in await read_all(c.store, owner, current, with_vectors=True)
             if (f.attribute is not None or f.slot_by_model) and f.outdated_by is None]
    pid = profile.profile_id(owner.tenant, owner.user_id)
    existing = await c.store.get(owner.scope, [pid])
    if not facts:
        if existing:
            await erase(c.store, c.publish, owner.scope, [pid], "profile_empty")
        return 0
    evidence = await read_all(c.store, owner, EntryFilter(kinds=["episodic"]))
    as_of = max((e.occurred_at for e, _ in evidence), default=None)
    built = profile.build(owner.tenant, owner.user_id, facts, c.sparse, existing[0] if existing else None, now,
                          as_of)
    if built is None:
        return 0
    await c.store.upsert([built])
    return 1


async def consolidate(c: Consolidation, tenant: str, request: ConsolidateRequest,
                      now: datetime | None = None) -> ConsolidationSummary:
    """Run the requested jobs (all by default) for the tenant, or only for `request.user_id`, and say what changed."""
    check_tenant(request, tenant)
    started, clock = now or datetime.now(UTC), time.perf_counter()
    jobs = set(request.jobs or ALL_JOBS)
    apply = applier(c.store, c.publish, started)
    listed = await all_entries(c.store, Scope(tenant_id=tenant, user_id=request.user_id))
    found = owners(tenant, listed)
    counts = dict.fromkeys(("scored", "superseded", "merged", "forgotten", "profiles_updated"), 0)
    for owner in found:
        if "score" in jobs:
            counts["scored"] += await _score(c, owner, apply)
        if "supersede" in jobs:
            counts["superseded"] += await _supersede(c, owner, apply)
        if "merge" in jobs:
            counts["merged"] += await _merge(c, owner, apply)
        if "forget" in jobs:
            counts["forgotten"] += await _forget(c, owner, started)
        if "supersede" in jobs or "profile" in jobs:
            # After merge and retention, whose results it reads: run again, it finds the same and changes nothing.
            await _outdate(c, owner, apply)
        if "profile" in jobs:
            counts["profiles_updated"] += await _profile(c, owner, started)
    metrics.consolidation_merged_total.inc(counts["merged"])
    metrics.consolidation_superseded_total.inc(counts["superseded"])
    return ConsolidationSummary(**counts, owners=len(found), started_at=started,
                                duration_ms=(time.perf_counter() - clock) * 1e3)
