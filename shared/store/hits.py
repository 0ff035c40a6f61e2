"""What both backends share once the engine has answered: hits with their per-search ranks, get via scroll, and
single searches and reads by time via a batch of reads."""
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from shared.store.model import (
    DENSE,
    Condition,
    EntryFilter,
    HybridSearch,
    MemoryEntry,
    Page,
    Read,
    Scope,
    ScoredEntry,
    TimeRead,
    VectorRead,
    Vectors,
)


class _Point(Protocol):
    id: Any
    score: float
    payload: dict[str, Any] | None
    vector: Any


def dense_of(vector: Any) -> list[float]:
    """The dense vector of a point as either engine returns it (a dict of named vectors)."""
    found = vector.get(DENSE) if isinstance(vector, dict) else None
    return [float(x) for x in found] if found is not None else []


# How many more hits each search asks the engine for than the fusion keeps: equal scores (two entries with the same
# BM25 score are common) come back from the engine in no fixed order, and the rank one gets decides its fused score.
# Within what comes back, ties are ordered by id here.
TIE_MARGIN = 10


def _settled(points: list[Any], keep: int) -> list[Any]:
    """The best `keep` of a search's points by score, equal scores by id."""
    return sorted(points, key=lambda p: (-float(p.score), str(p.id)))[:keep]


def _holds(entry: MemoryEntry, condition: Condition) -> bool:
    """Whether a boost's condition holds on an entry (as the engine's payload match would)."""
    value = getattr(entry, condition.key, None)
    if condition.op == "any":
        found = value if isinstance(value, list) else [value]
        return any(v in found for v in condition.value)
    if condition.op == "eq":
        return condition.value in value if isinstance(value, list) else value == condition.value
    if condition.op == "range":
        return value is not None and ((condition.gte is None or value >= condition.gte)
                                      and (condition.lte is None or value <= condition.lte)
                                      and (condition.lt is None or value < condition.lt))
    if condition.op == "ids":
        return entry.id in condition.value
    return value is None or value == []


def rrf(rank: int, rrf_k: int) -> float:
    """What a 1-based rank in one search adds to a hit's reciprocal rank fusion, as Qdrant computes it."""
    return 1.0 / (rrf_k + rank - 1)


def fuse(dense: list[Any], sparse: list[Any], search: HybridSearch, explain: bool,
         with_vectors: bool) -> list[ScoredEntry]:
    """A hybrid search's hits from its dense and sparse results (each asked for `prefetch_limit + TIE_MARGIN`):
    reciprocal rank fusion (`rrf` of its rank in each search, as Qdrant computes it), the best
    `max(limit, candidates)` of it boosted (score × (1 + the weight of each boost with a condition that holds)),
    the best `limit` kept. Done here rather than in the engine so that every tie is ordered by id: the same
    question gets the same hits in the same order every time, and from every store holding the same entries (the
    engine's fusion answered LoCoMo questions in other orders from one ask to the next, and from an imported copy:
    two entries with the same BM25 score took ranks 3 and 4 in one store, 4 and 3 in the other)."""
    lists = [_settled(dense, search.prefetch_limit), _settled(sparse, search.prefetch_limit)]
    ranks = [{str(p.id): (rank, float(p.score)) for rank, p in enumerate(points, start=1)} for points in lists]
    points: dict[str, Any] = {}
    vectors: dict[str, list[float]] = {}
    for found in lists:
        for point in found:
            points.setdefault(str(point.id), point)
            if with_vectors and dense_of(point.vector):
                vectors.setdefault(str(point.id), dense_of(point.vector))
    fused = {pid: sum(rrf(by[pid][0], search.rrf_k) for by in ranks if pid in by) for pid in points}
    pool = sorted(fused, key=lambda pid: (-fused[pid], pid))[:max(search.limit, search.candidates)]
    entries = {pid: MemoryEntry.from_point(pid, points[pid].payload or {}) for pid in pool}
    scores = {pid: fused[pid] * (1 + sum(b.weight for b in search.boosts
                                         if any(_holds(entries[pid], c) for c in b.any_of)))
              for pid in pool}
    out = []
    for pid in sorted(pool, key=lambda pid: (-scores[pid], pid))[:search.limit]:
        dense_hit, sparse_hit = (ranks[0].get(pid), ranks[1].get(pid)) if explain else (None, None)
        out.append(ScoredEntry(
            entry=entries[pid], score=scores[pid],
            dense_rank=dense_hit[0] if dense_hit else None, dense_score=dense_hit[1] if dense_hit else None,
            sparse_rank=sparse_hit[0] if sparse_hit else None, sparse_score=sparse_hit[1] if sparse_hit else None,
            vector=vectors.get(pid) if with_vectors else None))
    return out


def to_hits(points: list[Any]) -> list[ScoredEntry]:
    """Scored entries from one search's result, as the engine ranked them."""
    return [ScoredEntry(entry=MemoryEntry.from_point(str(p.id), p.payload or {}), score=float(p.score))
            for p in points]


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


class ReadingStore(Protocol):
    """The part of a backend that single searches and reads by time are built on."""

    async def reads(self, reads: Sequence[Read]) -> list[list[ScoredEntry]]:
        """Several reads in one engine call, each under its own scope and filter, in order."""


class SingleReadsMixin:
    """search, newest and earliest, each a batch of one read (so both backends ask the engine the same way)."""

    async def search(self: ReadingStore, scope: Scope, vectors: Vectors, *, using: Literal["dense", "sparse"],
                     limit: int, entry_filter: EntryFilter | None = None) -> list[ScoredEntry]:
        """One vector alone (dense or sparse), under the scope's filter."""
        read = VectorRead(scope=scope, vectors=vectors, using=using, limit=limit, entry_filter=entry_filter)
        return (await self.reads([read]))[0]

    async def newest(self: ReadingStore, scope: Scope, *, entry_filter: EntryFilter | None = None,
                     limit: int = 100) -> list[MemoryEntry]:
        """Up to `limit` entries, the most recent first (ordered by the `occurred_at` index)."""
        read = TimeRead(scope=scope, entry_filter=entry_filter, limit=limit, newest=True)
        return [h.entry for h in (await self.reads([read]))[0]]

    async def earliest(self: ReadingStore, scope: Scope, *, entry_filter: EntryFilter | None = None,
                       limit: int = 100) -> list[MemoryEntry]:
        """Up to `limit` entries, the earliest first (ordered by the `occurred_at` index)."""
        return [h.entry for h in (await self.reads([TimeRead(scope=scope, entry_filter=entry_filter, limit=limit)]))[0]]
