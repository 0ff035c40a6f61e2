"""One consolidation run for a tenant: score, supersede, merge, forget by retention, profile, owner by owner.

An owner is a user (their entries from every conversation), or a conversation for entries that name no user.
Every job reads what it needs just before it writes, writes only what differs, and decides from the stored data
and `now` alone, so a run is idempotent and may be interrupted anywhere: the next run finishes the work.
"""
import asyncio
import hashlib
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import metadata

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
from shared.store import EntryFilter, MemoryEntry, Scope, Store, pages
from shared.store.protocol import DEFERRED_FLUSH

ALL_JOBS: tuple[ConsolidationJob, ...] = ("score", "supersede", "merge", "forget", "profile")


# The revision of the jobs' rules, in the fingerprint: raise it when a rule changes what a job writes from the same
# entries, so a scheduled run after a deploy goes over every owner, not only those with something new (the version
# stays 0.1.0 between releases). 2: a repeat of the value a chat later undoes an outdated mark; 3: profiles leave
# endings out; 4: an episode naming another value of the slot after the fact's is no repeat; 5: the outdated band is
# measured among the episodes besides the fact's source window; 6: relatives, origins, birthdays and allergies are
# never marked outdated, and another value of the slot named before the fact's also makes an episode no repeat; 7: a
# liking is never said again by a window that says "likes", and is searched for without its object; 8: only the
# rules' own restatement says a fact again (an episode naming its value is evidence about the same thing); 9: two
# episodes that hold an assistant's turns besides the user's merge only when the user's words are alike too.
RULES = 9


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

    @property
    def incremental(self) -> bool:
        """Whether a scheduled run may skip owners with no change: not when the model judges facts, since a
        neighbourhood it could not answer is asked again on the next run whether or not anything changed."""
        return self.llm is None or not self.settings.llm_consolidate

    def fingerprint(self, tenant: str) -> str:
        """What the jobs' decisions depend on besides the stored data: the settings they read, the engram version
        and the revision of their rules. A scheduled run after it changed goes over every owner."""
        s = self.settings
        try:
            version = metadata.version("engram-server")
        except metadata.PackageNotFoundError:
            version = "unknown"
        wanted = {"version": version, "policy": self.policy(tenant).__dict__, "merge": [s.merge_threshold,
                  s.merge_min_overlap], "outdated": [s.outdated_band, s.rrf_k], "llm": self.incremental, "rules": RULES}
        return hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:16]


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


async def find_owners(store: Store, scope: Scope, entry_filter: EntryFilter | None = None) -> list[Owner]:
    """Every owner with an entry in the scope matching the filter, users first, in a stable order: listed from the
    payload index (user and conversation keys), so no entry is read however many the tenant holds."""
    users = await store.distinct(scope, "user_id", entry_filter)
    conversations: list[str] = []
    if scope.user_id is None:
        no_user = (entry_filter or EntryFilter()).model_copy(update={"without_user": True})
        conversations = await store.distinct(scope, "conversation_id", no_user)
    return [Owner(scope.tenant_id, u, None) for u in users] + [Owner(scope.tenant_id, None, c) for c in conversations]


async def changed_owners(c: Consolidation, scope: Scope, since: datetime, now: datetime,
                         last_stamp: datetime | None = None) -> list[Owner]:
    """The owners a run has work for when the last one went over every owner up to `since`: those with an entry
    written or changed since (new entries, a forget's mending, an ingestor's supersede), and, under a TTL, those
    holding an entry past it (the one decision that moves with the wall clock). Every other owner's jobs would
    decide what they decided last time: each is a pure function of the owner's entries, and the one change that
    stamps no `updated_at`, a recall's use count, only raises retention. Deletions stamp nothing either: a forget
    makes the tenant's next scheduled run a full one (see lease.py).

    Args:
        last_stamp: the `updated_at` the last run wrote (its start): its own writes are its output, which a run
            over the same entries would write again, so they are no change to look at.
    """
    if last_stamp is None or last_stamp < since:
        changed = [EntryFilter(updated_since=since)]
    else:
        changed = [EntryFilter(updated_since=since, updated_before=last_stamp),
                   EntryFilter(updated_since=last_stamp + timedelta(microseconds=1))]
    ttl_days = c.policy(scope.tenant_id).ttl_days
    if ttl_days is not None:
        changed.append(EntryFilter(until=now - timedelta(days=ttl_days)))
    found: set[Owner] = set()
    for entry_filter in changed:
        found.update(await find_owners(c.store, scope, entry_filter))
    return sorted(found, key=lambda o: (o.user_id is None, o.user_id or "", o.conversation_id or ""))


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
    await apply(owner.tenant, await outdated.changes(c.store, owner.scope, facts, c.sparse, c.settings.outdated_band,
                                                     c.settings.rrf_k))


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
    facts = [(f, d) for f, d in await read_all(c.store, owner, current, with_vectors=True) if profile.current(f)]
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


async def consolidate(c: Consolidation, tenant: str, request: ConsolidateRequest, now: datetime | None = None,
                      changed_since: tuple[datetime, datetime | None] | None = None) -> ConsolidationSummary:
    """Run the requested jobs (all by default) for the tenant, or only for `request.user_id`, and say what changed.

    Args:
        now: the run's time, which its writes are stamped with.
        changed_since: only the owners with work since then, given the last run's stamp (see `changed_owners`);
            None: every owner.
    """
    check_tenant(request, tenant)
    deferred = DEFERRED_FLUSH.set(True)  # derived writes, durable together at the end (a crash: the run again)
    try:
        summary = await _run(c, tenant, request, now, changed_since)
    finally:
        DEFERRED_FLUSH.reset(deferred)
    await c.store.flush()  # a run that failed is run again; its writes go with the next flush due
    return summary


async def _run(c: Consolidation, tenant: str, request: ConsolidateRequest, now: datetime | None,
               changed_since: tuple[datetime, datetime | None] | None) -> ConsolidationSummary:
    started, clock = now or datetime.now(UTC), time.perf_counter()
    jobs = set(request.jobs or ALL_JOBS)
    apply = applier(c.store, c.publish, started)
    scope = Scope(tenant_id=tenant, user_id=request.user_id)
    found = (await find_owners(c.store, scope) if changed_since is None
             else await changed_owners(c, scope, changed_since[0], started, changed_since[1]))
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
