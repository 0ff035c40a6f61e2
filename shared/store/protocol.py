"""The Store protocol: one async interface over Qdrant Edge and qdrant-client."""
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, Literal, Protocol

from shared.store.model import (
    Boost,
    EntryFilter,
    HybridSearch,
    MemoryEntry,
    Page,
    Read,
    Scope,
    ScoredEntry,
    StoredEntry,
    Vectors,
)

# Set while a job makes writes a crash may lose (a consolidation run: derived entries, which a crash only makes it run
# again): a backend may make them durable later, at the latest when the job calls `flush` at its end. Every other
# write is durable when it returns (an ingestor acknowledges turns after their entries are written).
DEFERRED_FLUSH: ContextVar[bool] = ContextVar("engram_store_deferred_flush", default=False)


class Store(Protocol):
    """Long-term memory. Every read and delete takes a Scope; the tenant in it is always applied."""

    async def upsert(self, items: list[StoredEntry]) -> None:
        """Insert or replace entries by their deterministic ids."""

    async def hybrid_query(self, scope: Scope, vectors: Vectors, *, limit: int, entry_filter: EntryFilter | None = None,
                           prefetch_limit: int = 40, rrf_k: int = 3, boosts: Sequence[Boost] = (),
                           candidates: int = 0, explain: bool = False,
                           with_vectors: bool = False) -> list[ScoredEntry]:
        """Dense and sparse prefetch fused (RRF) in the store, then `boosts` applied to the best `candidates`
        fused hits (at least `limit`) in the store; with explain, each hit's per-search ranks."""

    async def hybrid_batch(self, scope: Scope, searches: Sequence[HybridSearch],
                           explain: bool = False) -> list[list[ScoredEntry]]:
        """Several hybrid searches in one round trip to the engine, each under the scope's filter, in order; with
        `explain`, each hit carries its rank and score in the dense and the sparse search."""

    async def search(self, scope: Scope, vectors: Vectors, *, using: Literal["dense", "sparse"], limit: int,
                     entry_filter: EntryFilter | None = None) -> list[ScoredEntry]:
        """One vector alone (dense or sparse), under the scope's filter."""

    async def reads(self, reads: Sequence[Read]) -> list[list[ScoredEntry]]:
        """Several reads in one round trip to the engine, each under its own scope and filter (the tenant in it is
        always applied), in order: a VectorRead's hits as `search` returns them, a TimeRead's entries as `earliest`
        or `newest` return them (their scores say nothing)."""

    async def get(self, scope: Scope, ids: list[str]) -> list[MemoryEntry]:
        """Entries by id, only those inside the scope."""

    async def scroll(self, scope: Scope, *, entry_filter: EntryFilter | None = None, limit: int = 100,
                     offset: str | None = None, with_vectors: bool = False) -> Page:
        """A page of entries in id order; pass `next_offset` back for the next page. With `with_vectors`, the
        page's `dense` holds each entry's dense vector."""

    async def newest(self, scope: Scope, *, entry_filter: EntryFilter | None = None,
                     limit: int = 100) -> list[MemoryEntry]:
        """Up to `limit` entries, the most recent first (by `occurred_at`; entries of one instant in any order). The
        next page narrows `entry_filter.until` (inclusive) to the last instant seen."""

    async def earliest(self, scope: Scope, *, entry_filter: EntryFilter | None = None,
                       limit: int = 100) -> list[MemoryEntry]:
        """Up to `limit` entries, the earliest first (by `occurred_at`; entries of one instant in any order)."""

    async def tenants(self, limit: int = 100_000) -> list[str]:
        """Every tenant that has entries. The one read not scoped to a tenant: it returns ids, never data."""

    async def distinct(self, scope: Scope, key: Literal["user_id", "conversation_id"],
                       entry_filter: EntryFilter | None = None) -> list[str]:
        """The distinct user (or conversation) ids among the entries matching the scope and filter, sorted, read
        from the payload index (no entry is read)."""

    async def kind_counts(self, entry_filter: EntryFilter | None = None) -> dict[str, int]:
        """How many entries of each kind match the filter across every tenant. Like `tenants`, not scoped to a
        tenant: it returns counts, never data."""

    async def count(self, scope: Scope, entry_filter: EntryFilter | None = None) -> int:
        """How many entries match."""

    async def delete(self, scope: Scope, ids: list[str]) -> int:
        """Delete entries by id inside the scope; returns how many existed."""

    async def delete_where(self, scope: Scope, entry_filter: EntryFilter | None = None) -> int:
        """Delete every entry matching the scope and filter; returns how many."""

    async def set_payload(self, scope: Scope, ids: list[str], payload: dict[str, Any]) -> None:
        """Update payload fields of entries inside the scope."""

    async def replace(self, items: list[StoredEntry]) -> None:
        """Write these entries in place of those with their ids (the ids kept), such that `erase` can take the
        versions they replace off the disk (a forget rewriting an episode without the forgotten person's words)."""

    async def erase(self) -> None:
        """Make what deletes and replacements removed leave the disk, as far as the backend can (see each)."""

    async def flush(self) -> None:
        """Make every write so far durable (the writes made under `DEFERRED_FLUSH`)."""

    async def close(self) -> None:
        """Flush and release resources."""
