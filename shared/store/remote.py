"""qdrant-client backend: a Qdrant server or cluster at ENGRAM_QDRANT_URL (or the client's local mode in tests)."""
import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from engram_client.errors import Unavailable
from shared.store import scope as scoping
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


def _condition(cond: Condition) -> Any:
    if cond.op == "eq":
        return qm.FieldCondition(key=cond.key, match=qm.MatchValue(value=cond.value))
    if cond.op == "any":
        return qm.FieldCondition(key=cond.key, match=qm.MatchAny(any=list(cond.value)))
    if cond.op == "range":
        return qm.FieldCondition(key=cond.key, range=qm.DatetimeRange(gte=cond.gte, lte=cond.lte, lt=cond.lt))
    if cond.op == "ids":
        return qm.HasIdCondition(has_id=list(cond.value))
    if cond.op == "is_null":
        return qm.IsEmptyCondition(is_empty=qm.PayloadField(key=cond.key))
    raise ValueError(f"unknown condition op {cond.op!r}")


def _filter(scope: Scope, entry_filter: EntryFilter | None = None) -> qm.Filter:
    return qm.Filter(must=[_condition(c) for c in scoping.conditions(scope, entry_filter)])


def _scope_idf(scope: Scope, corpus: EntryFilter | None = None) -> qm.SearchParams:
    # BM25 IDF over the scope's own entries (the user's, or the whole tenant's): ranking never depends on, or
    # leaks, anyone else's words, and the engine counts a small scope's terms directly instead of walking
    # every posting list of the collection (0.45 → 0.10 ms at 1M entries).
    return qm.SearchParams(idf=qm.IdfCorpusParams(corpus=_filter(scope, corpus)))


@contextlib.contextmanager
def _reachable(what: str) -> Iterator[None]:
    """Turn the Qdrant server's "not now" (no connection, 429, 5xx) into Unavailable, which callers retry."""
    try:
        yield
    except ResponseHandlingException as exc:  # the request never got an answer: connection refused, reset, timeout
        cause = exc.source  # httpx's ReadTimeout says nothing in its text: name it
        raise Unavailable(f"Qdrant did not answer {what}: {type(cause).__name__} {cause}".rstrip()) from exc
    except UnexpectedResponse as exc:
        if exc.status_code == 429 or (exc.status_code or 0) >= 500:
            raise Unavailable(f"Qdrant answered {exc.status_code} to {what}") from exc
        raise


def _sparse(vectors: Vectors) -> qm.SparseVector:
    return qm.SparseVector(indices=list(vectors.sparse.indices), values=list(vectors.sparse.values))


class ClientStore(ByIdMixin, SingleReadsMixin):
    """Store on qdrant-client's AsyncQdrantClient: same behaviour as EdgeStore, over HTTP/gRPC or local mode."""

    def __init__(self, client: AsyncQdrantClient, collection: str) -> None:
        self._client = client
        self._collection = collection

    @property
    def client(self) -> AsyncQdrantClient:
        """The connection this store uses (closed with it)."""
        return self._client

    @classmethod
    async def open(cls, client: AsyncQdrantClient, collection: str, dense_dim: int) -> "ClientStore":
        """Use `collection`, creating it (vectors, payload indexes) on first use."""
        try:
            exists = await client.collection_exists(collection)
        except Exception as exc:  # connection refused, DNS, TLS: say which server
            where = getattr(client, "init_options", {}).get("url")
            raise Unavailable(f"Qdrant at {where} is unreachable: {exc}") from exc
        if not exists:
            await client.create_collection(
                collection,
                vectors_config={DENSE: qm.VectorParams(size=dense_dim, distance=qm.Distance.COSINE)},
                sparse_vectors_config={SPARSE: qm.SparseVectorParams(
                    modifier=qm.Modifier.IDF,
                    index=qm.SparseIndexParams(full_scan_threshold=scoping.SPARSE_FULL_SCAN_THRESHOLD))},
                hnsw_config=qm.HnswConfigDiff(m=scoping.HNSW_M, payload_m=scoping.HNSW_PAYLOAD_M,
                                              ef_construct=scoping.HNSW_EF_CONSTRUCT,
                                              full_scan_threshold=scoping.FULL_SCAN_THRESHOLD_KB),
            )
        if not cls._is_local(client):  # local mode has no payload indexes (and warns if asked)
            info = await client.get_collection(collection)
            scoping.check_layout(set(info.payload_schema or {}), f"collection {collection!r}")
            await client.create_payload_index(
                collection, scoping.TENANT_FIELD,
                qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True))
            for name in scoping.GRAPH_KEYWORD_INDEXES:
                await client.create_payload_index(collection, name, qm.KeywordIndexParams(
                    type=qm.KeywordIndexType.KEYWORD))
            for name in scoping.KEYWORD_INDEXES:
                await client.create_payload_index(collection, name, qm.KeywordIndexParams(
                    type=qm.KeywordIndexType.KEYWORD, enable_hnsw=False))
            for name in scoping.DATETIME_INDEXES:
                await client.create_payload_index(collection, name, qm.DatetimeIndexParams(
                    type=qm.DatetimeIndexType.DATETIME, enable_hnsw=False))
        return cls(client, collection)

    @staticmethod
    def _is_local(client: AsyncQdrantClient) -> bool:
        return type(getattr(client, "_client", None)).__name__ == "AsyncQdrantLocal"

    async def upsert(self, items: list[StoredEntry]) -> None:
        """Insert or replace entries by id (waits until applied)."""
        if not items:
            return
        points = [qm.PointStruct(id=i.entry.id, payload=i.entry.payload(),
                                 vector={DENSE: list(i.vectors.dense), SPARSE: _sparse(i.vectors)}) for i in items]
        with _reachable(f"an upsert of {len(points)} entries"):
            await self._client.upsert(self._collection, points=points, wait=True)

    async def replace(self, items: list[StoredEntry]) -> None:
        """Write these entries in place of those with their ids: an upsert (a Qdrant server writes an updated point
        anew and marks the old version deleted, for its vacuum)."""
        await self.upsert(items)

    async def flush(self) -> None:
        """Nothing to do: every write waits until the server applied it."""

    async def erase(self) -> None:
        """Nothing the client API can force. A Qdrant server drops deleted points' payload when its vacuum
        optimizer rewrites their segment (once the collection's `deleted_threshold`, 20% by default, of a segment
        is deleted) and keeps every operation in its write-ahead log until the log's 32 MB segment is full and
        flushed; qdrant-client's local mode keeps points in memory or in a SQLite file. See docs/guarantees.md."""

    @staticmethod
    def _searches(scope: Scope, search: HybridSearch, with_vectors: bool = False) -> list[qm.QueryRequest]:
        """The dense and the sparse search a hybrid search fuses (hits.fuse), a few more hits each than it keeps."""
        flt = _filter(scope, search.entry_filter)
        limit, vector = search.prefetch_limit + TIE_MARGIN, [DENSE] if with_vectors else False
        return [qm.QueryRequest(query=list(search.vectors.dense), using=DENSE, limit=limit, filter=flt,
                                with_payload=True, with_vector=vector),
                qm.QueryRequest(query=_sparse(search.vectors), using=SPARSE, limit=limit, filter=flt,
                                with_payload=True, with_vector=vector, params=_scope_idf(scope, search.idf_corpus))]

    async def hybrid_query(self, scope: Scope, vectors: Vectors, *, limit: int, entry_filter: EntryFilter | None = None,
                           prefetch_limit: int = 40, rrf_k: int = 3, boosts: Sequence[Boost] = (),
                           candidates: int = 0, explain: bool = False,
                           with_vectors: bool = False) -> list[ScoredEntry]:
        """Dense and sparse search under the scope's filter in one request, fused by RRF and boosted in hits.fuse
        (every tie in id order)."""
        search = HybridSearch(vectors=vectors, limit=limit, entry_filter=entry_filter, prefetch_limit=prefetch_limit,
                              rrf_k=rrf_k, boosts=list(boosts), candidates=candidates)
        with _reachable("a hybrid query"):
            dense, sparse = await self._client.query_batch_points(self._collection,
                                                                  requests=self._searches(scope, search, with_vectors))
        return fuse(dense.points, sparse.points, search, explain, with_vectors)

    async def hybrid_batch(self, scope: Scope, searches: Sequence[HybridSearch],
                           explain: bool = False) -> list[list[ScoredEntry]]:
        """Several hybrid searches in one request to the server, each under the scope's filter (with ranks when
        explained)."""
        if not searches:
            return []
        with _reachable("a batch of hybrid queries"):
            results = await self._client.query_batch_points(
                self._collection, requests=[r for s in searches for r in self._searches(scope, s)])
        return [fuse(results[2 * i].points, results[2 * i + 1].points, search, explain, with_vectors=False)
                for i, search in enumerate(searches)]

    @staticmethod
    def _request(read: Read) -> qm.QueryRequest:
        """The server's query for one read: a search by one vector, or entries ordered by `occurred_at`."""
        flt = _filter(read.scope, read.entry_filter)
        if isinstance(read, TimeRead):
            direction = qm.Direction.DESC if read.newest else qm.Direction.ASC
            return qm.QueryRequest(query=qm.OrderByQuery(order_by=qm.OrderBy(key=scoping.OCCURRED_AT,
                                                                             direction=direction)),
                                   filter=flt, limit=read.limit, with_payload=True)
        if read.using == DENSE:
            return qm.QueryRequest(query=list(read.vectors.dense), using=DENSE, filter=flt, limit=read.limit,
                                   with_payload=True)
        return qm.QueryRequest(query=_sparse(read.vectors), using=SPARSE, filter=flt, limit=read.limit,
                               with_payload=True, params=_scope_idf(read.scope))

    async def reads(self, reads: Sequence[Read]) -> list[list[ScoredEntry]]:
        """Several reads in one request to the server, each under its own scope and filter, in order."""
        if not reads:
            return []
        with _reachable("a batch of reads"):
            results = await self._client.query_batch_points(self._collection,
                                                            requests=[self._request(r) for r in reads])
        return [to_hits(result.points) for result in results]

    async def scroll(self, scope: Scope, *, entry_filter: EntryFilter | None = None, limit: int = 100,
                     offset: str | None = None, with_vectors: bool = False) -> Page:
        """A page of entries in id order (with their dense vectors when asked)."""
        with _reachable("a scroll"):
            records, next_offset = await self._client.scroll(
                self._collection, scroll_filter=_filter(scope, entry_filter), limit=limit, offset=offset,
                with_payload=True, with_vectors=[DENSE] if with_vectors else False)
        return Page(entries=[MemoryEntry.from_point(r.id, r.payload or {}) for r in records],
                    next_offset=str(next_offset) if next_offset is not None else None,
                    dense=[dense_of(r.vector) for r in records] if with_vectors else None)

    async def tenants(self, limit: int = 100_000) -> list[str]:
        """Every tenant that has entries (a facet over the tenant index; no entry is read)."""
        with _reachable("a tenant listing"):
            response = await self._client.facet(self._collection, key=scoping.TENANT_FIELD, limit=limit, exact=True)
        return sorted(str(hit.value) for hit in response.hits)

    async def distinct(self, scope: Scope, key: Literal["user_id", "conversation_id"],
                       entry_filter: EntryFilter | None = None) -> list[str]:
        """The distinct user (or conversation) ids of the matching entries, from the payload index."""
        with _reachable("a listing of owners"):
            response = await self._client.facet(self._collection, key=scoping.DISTINCT_KEYS[key],
                                                facet_filter=_filter(scope, entry_filter),
                                                limit=scoping.DISTINCT_LIMIT, exact=True)
        return scoping.unscoped(scope, (str(hit.value) for hit in response.hits))

    async def kind_counts(self, entry_filter: EntryFilter | None = None) -> dict[str, int]:
        """Entries of each kind across every tenant (from the `kind` index)."""
        conditions = scoping.unscoped_conditions(entry_filter)
        with _reachable("a count by kind"):
            response = await self._client.facet(
                self._collection, key="kind", limit=16, exact=True,
                facet_filter=qm.Filter(must=[_condition(c) for c in conditions]) if conditions else None)
        return {str(hit.value): int(hit.count) for hit in response.hits}

    async def count(self, scope: Scope, entry_filter: EntryFilter | None = None) -> int:
        """How many entries match."""
        with _reachable("a count"):
            result = await self._client.count(self._collection, count_filter=_filter(scope, entry_filter),
                                              exact=True)
        return int(result.count)

    async def delete_where(self, scope: Scope, entry_filter: EntryFilter | None = None) -> int:
        """Delete every entry matching the scope and filter."""
        flt = _filter(scope, entry_filter)
        found = await self.count(scope, entry_filter)
        if found:
            with _reachable("a delete"):
                await self._client.delete(self._collection, points_selector=qm.FilterSelector(filter=flt), wait=True)
        return found

    async def set_payload(self, scope: Scope, ids: list[str], payload: dict[str, Any]) -> None:
        """Update payload fields of entries inside the scope."""
        if ids:
            with _reachable("a payload update"):
                await self._client.set_payload(self._collection, payload=payload,
                                               points=qm.FilterSelector(filter=_filter(scope, EntryFilter(ids=ids))),
                                               wait=True)

    async def close(self) -> None:
        """Close the client connection."""
        await asyncio.shield(self._client.close())
