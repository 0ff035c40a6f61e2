"""What both backends share once the engine has answered: hits with their per-search ranks, get via scroll."""
from typing import Any, Protocol

from shared.store.model import DENSE, EntryFilter, MemoryEntry, Page, Scope, ScoredEntry


class _Point(Protocol):
    id: Any
    score: float
    payload: dict[str, Any] | None
    vector: Any


def dense_of(vector: Any) -> list[float]:
    """The dense vector of a point as either engine returns it (a dict of named vectors)."""
    found = vector.get(DENSE) if isinstance(vector, dict) else None
    return [float(x) for x in found] if found is not None else []


def to_hits(fused: list[Any], per_search: list[list[Any]], with_vectors: bool) -> list[ScoredEntry]:
    """Scored entries from a fused result, with ranks and scores from the dense and sparse results (if run)."""
    ranks = [{str(p.id): (rank, float(p.score)) for rank, p in enumerate(points, start=1)} for points in per_search]
    out = []
    for point in fused:
        pid = str(point.id)
        dense_hit = ranks[0].get(pid) if ranks else None
        sparse_hit = ranks[1].get(pid) if len(ranks) > 1 else None
        vector = point.vector.get(DENSE) if with_vectors and isinstance(point.vector, dict) else None
        out.append(ScoredEntry(
            entry=MemoryEntry.from_point(pid, point.payload or {}), score=float(point.score),
            dense_rank=dense_hit[0] if dense_hit else None, dense_score=dense_hit[1] if dense_hit else None,
            sparse_rank=sparse_hit[0] if sparse_hit else None, sparse_score=sparse_hit[1] if sparse_hit else None,
            vector=list(vector) if vector is not None else None))
    return out


class ScrollingStore(Protocol):
    """The part of a backend that get and delete are built on."""

    async def scroll(self, scope: Scope, *, entry_filter: EntryFilter | None = None, limit: int = 100,
                     offset: str | None = None, with_vectors: bool = False) -> Page:
        """A page of entries in id order."""

    async def delete_where(self, scope: Scope, entry_filter: EntryFilter | None = None) -> int:
        """Delete every entry matching the scope and filter."""


class ByIdMixin:
    """get and delete by id, expressed as a scoped scroll and a scoped delete (so the tenant always applies)."""

    async def get(self: ScrollingStore, scope: Scope, ids: list[str]) -> list[MemoryEntry]:
        """Entries by id, only those inside the scope, in the order asked."""
        if not ids:
            return []
        page = await self.scroll(scope, entry_filter=EntryFilter(ids=ids), limit=len(ids))
        by_id = {e.id: e for e in page.entries}
        return [by_id[i] for i in ids if i in by_id]

    async def delete(self: ScrollingStore, scope: Scope, ids: list[str]) -> int:
        """Delete entries by id inside the scope; returns how many existed."""
        if not ids:
            return 0
        return await self.delete_where(scope, EntryFilter(ids=ids))
