"""Fencing: a consolidation writes only while it holds its tenant's lease.

A replica whose run is paused (a long GC, a stopped container, a starved host) past the lease's TTL loses the lease,
and another replica may take it and run a forget; when the paused run wakes, it must not write what it computed
before (a profile rebuilt from facts the forget just deleted). So every write of a leased run first checks its
fence: the lease was renewed less than FENCE_SHARE of the TTL ago by the local clock (a pause long enough to lose the
lease fails this at once, without a round trip), and, at most every REMOTE_CHECK_S, the lease key still names this
holder at this run's revision or a later one of its own. A failed check raises LeaseLost, which stops the run (the
next one redoes its work). The fence travels with the run's task (a context variable), so the jobs need not pass it
along; writes made outside a leased run are not fenced.
"""
import time
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from nats.js.errors import KeyDeletedError, KeyNotFoundError
from nats.js.kv import KeyValue
from pydantic import BaseModel, ConfigDict

from engram_client.errors import Unavailable
from shared.messaging import untrusted
from shared.messaging.connection import transient
from shared.store import (
    Boost,
    EntryFilter,
    HybridSearch,
    MemoryEntry,
    Page,
    Read,
    Scope,
    ScoredEntry,
    Store,
    StoredEntry,
    Vectors,
)


class LeaseLost(Unavailable):
    """Another replica may hold this tenant now: the run stops where it is (the next run finishes it)."""


FENCE_SHARE = 2 / 3    # of the TTL: renewals come every third, so a healthy run is never this late
REMOTE_CHECK_S = 1.0   # the lease key is read at most this often while a run writes


@dataclass
class Fence:
    """The lease a run holds: its key, this holder's name, the revision last written and when."""

    leases: KeyValue
    tenant: str
    holder: str
    ttl_s: float
    revision: int
    renewed_at: float = field(default_factory=time.monotonic)  # when the last renewal was sent
    checked_at: float = 0.0

    def renewed(self, revision: int, sent_at: float) -> None:
        """A renewal sent at `sent_at` (monotonic) was written as `revision`."""
        self.revision, self.renewed_at = revision, sent_at

    async def check(self) -> None:
        """Raise LeaseLost unless the lease is surely still this run's."""
        now = time.monotonic()
        if now - self.renewed_at > FENCE_SHARE * self.ttl_s:
            raise LeaseLost(f"the consolidation lease of tenant {self.tenant!r} was last renewed "
                            f"{now - self.renewed_at:.1f} s ago (TTL {self.ttl_s:g} s); not writing")
        if now - self.checked_at < REMOTE_CHECK_S:
            return
        with transient("reading a consolidation lease"):
            try:
                entry = await self.leases.get(self.tenant)
            except (KeyNotFoundError, KeyDeletedError):
                entry = None
        holder = _holder(entry.value if entry is not None else None, self.tenant)
        if entry is None or holder != self.holder or (entry.revision or 0) < self.revision:
            raise LeaseLost(f"the consolidation lease of tenant {self.tenant!r} is no longer this replica's")
        self.checked_at = now


class Held(BaseModel):
    """A lease's value as it is read: who holds it and, when engram named it, its process (process.py: read apart,
    so that a lease naming it in another form is still a lease)."""

    model_config = ConfigDict(extra="ignore")

    holder: str | None = None
    process: object = None


def _holder(value: bytes | None, tenant: str) -> str | None:
    held = untrusted.model(Held, value, "leases", tenant)
    return held.holder if held is not None else None


FENCE: ContextVar[Fence | None] = ContextVar("engram_consolidation_fence", default=None)


async def _checked() -> None:
    fence = FENCE.get()
    if fence is not None:
        await fence.check()


class FencedStore:
    """A store whose writes check the fence of the leased run making them (a `Store`); reads pass straight on."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def upsert(self, items: list[StoredEntry]) -> None:
        """Insert or replace entries, if the run still holds its lease."""
        await _checked()
        await self.store.upsert(items)

    async def replace(self, items: list[StoredEntry]) -> None:
        """Replace entries, if the run still holds its lease."""
        await _checked()
        await self.store.replace(items)

    async def erase(self) -> None:
        """As the store's (it writes nothing new)."""
        await self.store.erase()

    async def flush(self) -> None:
        """As the store's."""
        await self.store.flush()

    async def delete(self, scope: Scope, ids: list[str]) -> int:
        """Delete entries by id, if the run still holds its lease."""
        await _checked()
        return await self.store.delete(scope, ids)

    async def delete_where(self, scope: Scope, entry_filter: EntryFilter | None = None) -> int:
        """Delete matching entries, if the run still holds its lease."""
        await _checked()
        return await self.store.delete_where(scope, entry_filter)

    async def set_payload(self, scope: Scope, ids: list[str], payload: dict[str, Any]) -> None:
        """Update payload fields, if the run still holds its lease."""
        await _checked()
        await self.store.set_payload(scope, ids, payload)

    async def hybrid_query(self, scope: Scope, vectors: Vectors, *, limit: int, entry_filter: EntryFilter | None = None,
                           prefetch_limit: int = 40, rrf_k: int = 3, boosts: Sequence[Boost] = (),
                           candidates: int = 0, explain: bool = False,
                           with_vectors: bool = False) -> list[ScoredEntry]:
        """As the store's."""
        return await self.store.hybrid_query(scope, vectors, limit=limit, entry_filter=entry_filter,
                                             prefetch_limit=prefetch_limit, rrf_k=rrf_k, boosts=boosts,
                                             candidates=candidates, explain=explain, with_vectors=with_vectors)

    async def hybrid_batch(self, scope: Scope, searches: Sequence[HybridSearch],
                           explain: bool = False) -> list[list[ScoredEntry]]:
        """As the store's."""
        return await self.store.hybrid_batch(scope, searches, explain)

    async def search(self, scope: Scope, vectors: Vectors, *, using: Literal["dense", "sparse"], limit: int,
                     entry_filter: EntryFilter | None = None) -> list[ScoredEntry]:
        """As the store's."""
        return await self.store.search(scope, vectors, using=using, limit=limit, entry_filter=entry_filter)

    async def reads(self, reads: Sequence[Read]) -> list[list[ScoredEntry]]:
        """As the store's."""
        return await self.store.reads(reads)

    async def get(self, scope: Scope, ids: list[str]) -> list[MemoryEntry]:
        """As the store's."""
        return await self.store.get(scope, ids)

    async def scroll(self, scope: Scope, *, entry_filter: EntryFilter | None = None, limit: int = 100,
                     offset: str | None = None, with_vectors: bool = False) -> Page:
        """As the store's."""
        return await self.store.scroll(scope, entry_filter=entry_filter, limit=limit, offset=offset,
                                       with_vectors=with_vectors)

    async def newest(self, scope: Scope, *, entry_filter: EntryFilter | None = None,
                     limit: int = 100) -> list[MemoryEntry]:
        """As the store's."""
        return await self.store.newest(scope, entry_filter=entry_filter, limit=limit)

    async def earliest(self, scope: Scope, *, entry_filter: EntryFilter | None = None,
                       limit: int = 100) -> list[MemoryEntry]:
        """As the store's."""
        return await self.store.earliest(scope, entry_filter=entry_filter, limit=limit)

    async def tenants(self, limit: int = 100_000) -> list[str]:
        """As the store's."""
        return await self.store.tenants(limit)

    async def distinct(self, scope: Scope, key: Literal["user_id", "conversation_id"],
                       entry_filter: EntryFilter | None = None) -> list[str]:
        """As the store's."""
        return await self.store.distinct(scope, key, entry_filter)

    async def kind_counts(self, entry_filter: EntryFilter | None = None) -> dict[str, int]:
        """As the store's."""
        return await self.store.kind_counts(entry_filter)

    async def count(self, scope: Scope, entry_filter: EntryFilter | None = None) -> int:
        """As the store's."""
        return await self.store.count(scope, entry_filter)

    async def close(self) -> None:
        """The store's owner closes it, not a run."""
