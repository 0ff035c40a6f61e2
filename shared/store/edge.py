"""Qdrant Edge backend: the Qdrant engine in-process, persistent in one folder (one process per folder)."""
import asyncio
import json
import logging
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import qdrant_edge as qe

from engram_client.errors import Unavailable
from shared.store import scope as scoping
from shared.store.edge_calls import engine_errors, run
from shared.store.hits import TIE_MARGIN, ByIdMixin, SingleReadsMixin, dense_of, fuse, to_hits
from shared.store.model import (
    DENSE,
    SPARSE,
    Boost,
    Condition,
    EntryFilter,
    HybridSearch,
    MemoryEntry,
    Page,
    Read,
    Scope,
    ScoredEntry,
    StoredEntry,
    TimeRead,
    Vectors,
)
from shared.store.protocol import DEFERRED_FLUSH

FLUSH_S = 5.0  # as a Qdrant server's flush_interval_sec: a shard with a write-ahead log (made before 0.36)
log = logging.getLogger("engram.store.edge")
# What `optimize` does: vacuum any segment holding a deleted entry (so its text leaves the payload pages); build no
# HNSW index unless asked (`indexing=True`), which at 100,000 entries holds the interpreter for 87 s.
VACUUM_DELETED_SHARE = 1e-9


def _has_wal(path: Path) -> bool:
    """Whether the shard in `path` was made with a write-ahead log (the engine's default; engram's before 0.36).
    The engine cannot turn it off afterwards; `engram rebuild` moves memory into a shard without one."""
    try:
        return json.loads((path / "edge_config.json").read_text()).get("wal_enabled") is not False
    except FileNotFoundError:
        return any(path.glob("segments*"))  # older shards wrote no config file


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _condition(cond: Condition) -> Any:
    if cond.op == "eq":
        return qe.FieldCondition(key=cond.key, match=qe.MatchValue(cond.value))
    if cond.op == "any":
        return qe.FieldCondition(key=cond.key, match=qe.MatchAny(list(cond.value)))
    if cond.op == "range":
        return qe.FieldCondition(key=cond.key, range=qe.RangeDateTime(gte=_iso(cond.gte), lte=_iso(cond.lte),
                                                                        lt=_iso(cond.lt)))
    if cond.op == "ids":
        return qe.HasIdCondition({uuid.UUID(i) for i in cond.value})
    if cond.op == "is_null":
        return qe.IsEmptyCondition(cond.key)
    raise ValueError(f"unknown condition op {cond.op!r}")


def _filter(scope: Scope, entry_filter: EntryFilter | None = None) -> qe.Filter:
    return qe.Filter(must=[_condition(c) for c in scoping.conditions(scope, entry_filter)])


def _scope_idf(scope: Scope, corpus: EntryFilter | None = None) -> qe.SearchParams:
    # BM25 IDF over the scope's own entries (the user's, or the whole tenant's): ranking never depends on, or
    # leaks, anyone else's words, and the engine counts a small scope's terms directly instead of walking
    # every posting list of the collection (0.45 → 0.10 ms at 1M entries).
    return qe.SearchParams(idf=qe.IdfParams(corpus=_filter(scope, corpus)))


def _point(item: StoredEntry) -> qe.Point:
    vectors: dict[str, Any] = {
        DENSE: list(item.vectors.dense),
        SPARSE: qe.SparseVector(list(item.vectors.sparse.indices), list(item.vectors.sparse.values))}
    return qe.Point(uuid.UUID(item.entry.id), vectors, item.entry.payload())


def _ids(points: list[Any]) -> list[str]:
    return [str(p.id) for p in points]


class EdgeStore(ByIdMixin, SingleReadsMixin):
    """Store on Qdrant Edge. Calls run on the engine's own threads (see edge_calls.py), off the event loop; a call
    that holds Python's interpreter lock still stops every thread while it runs (`optimize` does: 1,020 s at 1M
    entries, docs/benchmarks.md). Once closed, every call fails `unavailable` (retried) until `adopt` hands it a
    shard.

    The shard keeps no write-ahead log, whose files would hold every text ever written (a deleted person's words
    too) until 32 MB of later writes rotate them: each write is flushed before it returns, which makes it as
    durable as the log did (2 ms a write at 20,000 entries), and `erase` vacuums what deletes left in the payload
    pages. A shard made with a log (before 0.36) keeps it (the engine cannot drop it): its writes are flushed at
    most every `flush_s`, as a Qdrant server flushes every 5 s. Until a flush, the space an update frees in the
    payload storage is not reused: without it, each payload rewrite (a recall's recorded use, a consolidation
    mark) grew the folder by about 1 KB for good (`python -m bench.store_growth --rewrite-s 60`).
    """

    def __init__(self, shard: qe.EdgeShard, path: Path | None = None, flush_s: float = FLUSH_S,
                 wal: bool = False) -> None:
        self._shard = shard
        self._path = path
        self.wal = wal
        self._closed = False
        self._write_lock = asyncio.Lock()
        self._retired: list[tuple[qe.EdgeShard, Path | None]] = []  # replaced by `adopt`, closed by close_retired
        self._period_s = flush_s  # between the flushes of a shard with a log, and of deferred writes
        self._flush_s = 0.0 if not wal else flush_s
        self._flushed_at = time.monotonic()

    @classmethod
    def open(cls, path: Path, dense_dim: int, flush_s: float = FLUSH_S, *, indexing: bool = False,
             wal: bool = False) -> "EdgeStore":
        """Open the shard in `path`, creating it (vectors, payload indexes) on first use.

        Args:
            indexing: `optimize` builds HNSW indexes (benchmarks, bulk loads); otherwise it only vacuums.
            wal: create a new shard with a write-ahead log, as engram did before 0.36 (tests of such shards).
        """
        wal = _has_wal(path) if path.exists() else wal
        if wal:
            log.warning("the Qdrant Edge shard in %s keeps a write-ahead log, whose files hold deleted entries' text "
                        "until later writes rotate them; `engram rebuild` moves memory into a shard without one",
                        path)
        config = qe.EdgeConfig(
            wal_enabled=None if wal else False,
            optimizers=qe.EdgeOptimizersConfig(deleted_threshold=VACUUM_DELETED_SHARE, vacuum_min_vector_number=1,
                                               indexing_threshold=None if indexing else 0),
            vectors={DENSE: qe.EdgeVectorParams(size=dense_dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(
                modifier=qe.Modifier.Idf, full_scan_threshold=scoping.SPARSE_FULL_SCAN_THRESHOLD)},
            hnsw_config=qe.HnswIndexConfig(m=scoping.HNSW_M, ef_construct=scoping.HNSW_EF_CONSTRUCT,
                                           full_scan_threshold=scoping.FULL_SCAN_THRESHOLD_KB,
                                           payload_m=scoping.HNSW_PAYLOAD_M),
        )
        if (path / "edge_config.json").exists() or any(path.glob("segments*")):
            shard = qe.EdgeShard.load(str(path), config)
        else:
            path.mkdir(parents=True, exist_ok=True)
            shard = qe.EdgeShard.create(str(path), config)
        existing = shard.info().payload_schema
        scoping.check_layout(set(existing), f"the Qdrant Edge shard in {path}")
        wanted: dict[str, Any] = {scoping.TENANT_FIELD: qe.KeywordIndexParams(is_tenant=True)}
        wanted.update({name: qe.KeywordIndexParams() for name in scoping.GRAPH_KEYWORD_INDEXES})
        wanted.update({name: qe.KeywordIndexParams(enable_hnsw=False) for name in scoping.KEYWORD_INDEXES})
        wanted.update({name: qe.DatetimeIndexParams(enable_hnsw=False) for name in scoping.DATETIME_INDEXES})
        for name, schema in wanted.items():
            if name not in existing:
                shard.update(qe.UpdateOperation.create_field_index(name, schema))
        shard.flush()
        return cls(shard, path, flush_s, wal)

    @property
    def closed(self) -> bool:
        """Whether `close` was called (and no shard adopted since)."""
        return self._closed

    async def _call(self, fn: Any, *args: Any) -> Any:
        """One engine call: refused at once on a closed store, the engine's transient errors as Unavailable."""
        where = str(self._path or "memory")
        if self._closed:
            raise Unavailable(f"the Qdrant Edge shard in {where} is closed")
        with engine_errors(where):
            return await run(fn, *args)

    async def _read(self, fn: Any, *args: Any) -> Any:
        return await self._call(fn, *args)

    async def _write(self, operation: qe.UpdateOperation) -> None:
        async with self._write_lock:
            await self._call(self._shard.update, operation)
            await self._flush_if_due()

    async def _flush_if_due(self) -> None:
        """Flush when the last flush is `flush_s` old: at once on a shard without a log, at most every `flush_s`
        on one with a log or for writes under DEFERRED_FLUSH (the caller holds the write lock)."""
        due = self._period_s if DEFERRED_FLUSH.get() else self._flush_s
        if time.monotonic() - self._flushed_at >= due:
            await self._call(self._shard.flush)
            self._flushed_at = time.monotonic()

    async def upsert(self, items: list[StoredEntry]) -> None:
        """Insert or replace entries by id."""
        if items:
            await self._write(qe.UpdateOperation.upsert_points([_point(i) for i in items]))

    async def replace(self, items: list[StoredEntry]) -> None:
        """Write these entries in place of those with their ids. The old versions are deleted first, in the same
        flush: rewritten in place, an entry's old payload would stay in its segment's pages, which no vacuum
        copies away as long as the segment holds no deleted entry. A shard with a write-ahead log only upserts (a
        crash between the two logged operations would lose the entry)."""
        if not items:
            return
        async with self._write_lock:
            if not self.wal:
                await self._call(self._shard.update, qe.UpdateOperation.delete_points([i.entry.id for i in items]))
            await self._call(self._shard.update, qe.UpdateOperation.upsert_points([_point(i) for i in items]))
            await self._flush_if_due()

    @staticmethod
    def _searches(scope: Scope, search: HybridSearch, with_vectors: bool = False) -> list[qe.QueryRequest]:
        """The dense and the sparse search a hybrid search fuses (hits.fuse), a few more hits each than it keeps."""
        flt = _filter(scope, search.entry_filter)
        vectors = search.vectors
        sparse = qe.SparseVector(list(vectors.sparse.indices), list(vectors.sparse.values))
        limit, vector = search.prefetch_limit + TIE_MARGIN, [DENSE] if with_vectors else False
        return [qe.QueryRequest(limit=limit, query=qe.Query.Nearest(list(vectors.dense), using=DENSE), filter=flt,
                                with_payload=True, with_vector=vector),
                qe.QueryRequest(limit=limit, query=qe.Query.Nearest(sparse, using=SPARSE), filter=flt,
                                with_payload=True, with_vector=vector, params=_scope_idf(scope, search.idf_corpus))]

    async def hybrid_query(self, scope: Scope, vectors: Vectors, *, limit: int, entry_filter: EntryFilter | None = None,
                           prefetch_limit: int = 40, rrf_k: int = 3, boosts: Sequence[Boost] = (),
                           candidates: int = 0, explain: bool = False,
                           with_vectors: bool = False) -> list[ScoredEntry]:
        """Dense and sparse search under the scope's filter in one engine call, fused by RRF and boosted in
        hits.fuse (every tie in id order)."""
        search = HybridSearch(vectors=vectors, limit=limit, entry_filter=entry_filter, prefetch_limit=prefetch_limit,
                              rrf_k=rrf_k, boosts=list(boosts), candidates=candidates)
        dense, sparse = await self._read(self._shard.query_batch,
                                         qe.QueryBatchRequest(self._searches(scope, search, with_vectors)))
        return fuse(dense, sparse, search, explain, with_vectors)

    async def hybrid_batch(self, scope: Scope, searches: Sequence[HybridSearch],
                           explain: bool = False) -> list[list[ScoredEntry]]:
        """Several hybrid searches in one engine call, each under the scope's filter (with ranks when explained)."""
        if not searches:
            return []
        results = await self._read(self._shard.query_batch, qe.QueryBatchRequest(
            [r for s in searches for r in self._searches(scope, s)]))
        return [fuse(results[2 * i], results[2 * i + 1], search, explain, with_vectors=False)
                for i, search in enumerate(searches)]

    @staticmethod
    def _request(read: Read) -> qe.QueryRequest:
        """The engine's query for one read: a search by one vector, or entries ordered by `occurred_at`."""
        flt = _filter(read.scope, read.entry_filter)
        if isinstance(read, TimeRead):
            direction = qe.Direction.Desc if read.newest else qe.Direction.Asc
            return qe.QueryRequest(limit=read.limit, query=qe.OrderBy(scoping.OCCURRED_AT, direction), filter=flt,
                                   with_payload=True, with_vector=False)
        if read.using == DENSE:
            return qe.QueryRequest(limit=read.limit, query=qe.Query.Nearest(list(read.vectors.dense), using=DENSE),
                                   filter=flt, with_payload=True)
        sparse = qe.SparseVector(list(read.vectors.sparse.indices), list(read.vectors.sparse.values))
        return qe.QueryRequest(limit=read.limit, query=qe.Query.Nearest(sparse, using=SPARSE), filter=flt,
                               with_payload=True, params=_scope_idf(read.scope))

    async def reads(self, reads: Sequence[Read]) -> list[list[ScoredEntry]]:
        """Several reads in one engine call, each under its own scope and filter, in order."""
        if not reads:
            return []
        results = await self._read(self._shard.query_batch, qe.QueryBatchRequest([self._request(r) for r in reads]))
        return [to_hits(points) for points in results]

    async def scroll(self, scope: Scope, *, entry_filter: EntryFilter | None = None, limit: int = 100,
                     offset: str | None = None, with_vectors: bool = False) -> Page:
        """A page of entries in id order (with their dense vectors when asked)."""
        request = qe.ScrollRequest(offset=uuid.UUID(offset) if offset else None, limit=limit,
                                   filter=_filter(scope, entry_filter), with_payload=True,
                                   with_vector=[DENSE] if with_vectors else False)
        records, next_offset = await self._read(self._shard.scroll, request)
        return Page(entries=[MemoryEntry.from_point(r.id, r.payload or {}) for r in records],
                    next_offset=str(next_offset) if next_offset is not None else None,
                    dense=[dense_of(r.vector) for r in records] if with_vectors else None)

    async def tenants(self, limit: int = 100_000) -> list[str]:
        """Every tenant that has entries (from the tenant index; no entry is read)."""
        response = await self._read(self._shard.facet, qe.FacetRequest(key=scoping.TENANT_FIELD, limit=limit,
                                                                         exact=True))
        return sorted(str(hit.value) for hit in response.hits)

    async def distinct(self, scope: Scope, key: Literal["user_id", "conversation_id"],
                       entry_filter: EntryFilter | None = None) -> list[str]:
        """The distinct user (or conversation) ids of the matching entries, from the payload index."""
        request = qe.FacetRequest(key=scoping.DISTINCT_KEYS[key], limit=scoping.DISTINCT_LIMIT, exact=True,
                                  filter=_filter(scope, entry_filter))
        response = await self._read(self._shard.facet, request)
        return scoping.unscoped(scope, (str(hit.value) for hit in response.hits))

    async def kind_counts(self, entry_filter: EntryFilter | None = None) -> dict[str, int]:
        """Entries of each kind across every tenant (from the `kind` index)."""
        conditions = scoping.unscoped_conditions(entry_filter)
        request = qe.FacetRequest(key="kind", limit=16, exact=True,
                                  filter=qe.Filter(must=[_condition(c) for c in conditions]) if conditions else None)
        response = await self._read(self._shard.facet, request)
        return {str(hit.value): int(hit.count) for hit in response.hits}

    async def count(self, scope: Scope, entry_filter: EntryFilter | None = None) -> int:
        """How many entries match."""
        request = qe.CountRequest(exact=True, filter=_filter(scope, entry_filter))
        return int(await self._read(self._shard.count, request))

    async def delete_where(self, scope: Scope, entry_filter: EntryFilter | None = None) -> int:
        """Delete every entry matching the scope and filter."""
        flt = _filter(scope, entry_filter)
        async with self._write_lock:
            found = int(await self._call(self._shard.count, qe.CountRequest(exact=True, filter=flt)))
            if found:
                await self._call(self._shard.update, qe.UpdateOperation.delete_points_by_filter(flt))
                await self._flush_if_due()
        return found

    async def set_payload(self, scope: Scope, ids: list[str], payload: dict[str, Any]) -> None:
        """Update payload fields of entries inside the scope (ids outside it are left alone)."""
        if ids:
            await self._write(qe.UpdateOperation.set_payload_by_filter(_filter(scope, EntryFilter(ids=ids)), payload))

    async def flush(self) -> None:
        """Make every write so far durable."""
        async with self._write_lock:
            await self._call(self._shard.flush)
            self._flushed_at = time.monotonic()

    async def optimize(self) -> None:
        """Run the engine's optimizers now: vacuum segments holding deleted entries and, on a store opened with
        `indexing`, build HNSW indexes (benchmarks and bulk loads)."""
        async with self._write_lock:
            await self._call(self._shard.optimize)
            await self._call(self._shard.flush)
            self._flushed_at = time.monotonic()

    async def erase(self) -> None:
        """Make what deletes removed leave the shard's files: vacuum the segments that hold deleted entries (their
        payload pages are copied without them and the old files removed) and flush. 0.25 s at 20,000 entries, 2.6
        s at 100,000 (a vacuum rebuilds no index). A shard with a write-ahead log still holds the text in its log
        files (see the class)."""
        await self.optimize()

    def view(self) -> "EdgeStore":
        """Another store over the shard this one serves now, which stays on it after an `adopt` (never close it:
        this store closes the shard)."""
        return EdgeStore(self._shard, self._path, self._period_s, self.wal)

    async def adopt(self, other: "EdgeStore") -> None:
        """Serve from `other`'s shard from now on: a rebuild's switch (writes in progress finish on the old shard
        first), or a closed store given its shard again (`EdgeStore.open` on the same folder). `other` must not be
        used again."""
        async with self._write_lock:
            if not self._closed:
                await self._call(self._shard.flush)
                self._retired.append((self._shard, self._path))
            self._shard, self._path, self._closed = other._shard, other._path, False
            self.wal, self._flush_s, self._period_s = other.wal, other._flush_s, other._period_s

    @property
    def retired_paths(self) -> list[Path]:
        """The folders of the shards `adopt` replaced that are still open (a rebuild's carry-over reads them)."""
        return [path for _, path in self._retired if path is not None]

    async def close_retired(self) -> None:
        """Close the shards `adopt` replaced, once nothing reads them any more (a rebuild's carry-over is done)."""
        async with self._write_lock:
            for shard, _ in self._retired:
                await run(shard.close)
            self._retired.clear()

    async def close(self) -> None:
        """Flush to disk and close the shard (and any it replaced); calls from now on fail `unavailable`. Closing
        a closed store does nothing."""
        async with self._write_lock:
            if self._closed:
                return
            self._closed = True  # calls arriving meanwhile are refused, not run against a half-closed shard
            await run(self._shard.flush)
            await run(self._shard.close)
            for shard, _ in self._retired:
                await run(shard.close)
            self._retired.clear()
