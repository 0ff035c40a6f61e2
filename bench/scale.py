"""Scale: synthetic entries (random unit vectors; 100 tenants x 100 users) in Qdrant Edge at growing sizes.

For each size: upsert rate, index build time, store-only query latency and end-to-end recall latency (the
retrieval path with a precomputed query vector), resident memory and disk. qdrant-client's local mode is
measured at the smallest size for contrast.
"""
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from qdrant_client import AsyncQdrantClient

from bench import memory
from engram_client.contract import RecallRequest
from shared.embedding import Bm25Encoder
from shared.evaluation.latency import percentiles
from shared.retrieval import Retrieval, search
from shared.settings import Settings
from shared.store import ClientStore, EdgeStore, MemoryEntry, Scope, Store, StoredEntry, Vectors

DIM = 384
TENANTS = 100
USERS = 100
QUERIES = 200
# Texts are drawn like natural language: a Zipf-distributed vocabulary, so a query term's posting list is as
# long as a real word's. (A handful of words repeated everywhere would put every term in a fifth of all entries.)
VOCABULARY = 30_000
TEXT_WORDS = 30
QUERY_WORDS = 3
_ZIPF = 1.0 / np.arange(1, VOCABULARY + 1) ** 1.07
_ZIPF /= _ZIPF.sum()


def _words(rng: np.random.Generator, rows: int, per_row: int) -> list[str]:
    ranks = rng.choice(VOCABULARY, size=(rows, per_row), p=_ZIPF)
    return [" ".join(f"w{r}" for r in row) for row in ranks]


class PrecomputedEmbedder:
    """Hands back a vector computed ahead of time, so the benchmark measures everything but the model."""

    dim = DIM

    def __init__(self, vector: list[float]) -> None:
        self.vector = vector

    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        """The precomputed vector for each text."""
        return [self.vector for _ in texts]

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        """The precomputed vector for each query."""
        return [self.vector for _ in texts]

    def problem(self) -> str | None:
        """Never broken."""
        return None

    async def close(self) -> None:
        """Nothing to release."""
        return None


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    unit: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return unit


def _rss_mb() -> float:
    return memory.status_mb()["rss_mb"]


def _service_memory(folder: Path) -> dict[str, float]:
    """What a fresh process that opens the (closed) shard and answers queries holds: see bench/memory.py."""
    done = subprocess.run([sys.executable, "-m", "bench.memory", str(folder), str(DIM), str(TENANTS), str(USERS)],
                          capture_output=True, text=True, check=True, cwd=Path(__file__).parents[1])
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _disk_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6


def _read_into_page_cache(folder: Path) -> None:
    """Read every file of the shard once, as a service that has been answering for a while has it cached."""
    for f in folder.rglob("*"):
        if f.is_file():
            with f.open("rb") as handle:
                while handle.read(1 << 24):
                    pass


async def _fill(store: Store, bm25: Bm25Encoder, rng: np.random.Generator, start: int, stop: int,
                batch: int = 1000) -> float:
    """Upsert entries start..stop; returns seconds."""
    now = datetime.now(UTC)
    took = 0.0
    for first in range(start, stop, batch):
        count = min(batch, stop - first)
        vectors = _unit(rng, count)
        texts = _words(rng, count, TEXT_WORDS)
        items = []
        for i in range(count):
            n = first + i
            text = texts[i]
            entry = MemoryEntry(id=str(uuid.UUID(int=n + 1)), tenant_id=f"t{n % TENANTS}",
                                user_id=f"u{(n // TENANTS) % USERS}", conversation_id=f"c{n % 5000}", text=text,
                                occurred_at=now, created_at=now, updated_at=now, source_turn_ids=[f"turn-{n}"])
            items.append(StoredEntry(entry=entry, vectors=Vectors(dense=vectors[i].tolist(),
                                                                  sparse=bm25.document(text, "english"))))
        started = time.perf_counter()
        await store.upsert(items)
        took += time.perf_counter() - started
    return took


async def _query_latency(store: Store, rng: np.random.Generator, bm25: Bm25Encoder, n: int,
                         ranks: bool = False) -> dict[str, Any]:
    """The store's hybrid query alone; with `ranks`, also each search on its own in the same call, as recall asks
    when it counts ranks by kind (currency.among_own_kind) and as `explain` does."""
    queries = _unit(rng, n)
    words = _words(rng, n, QUERY_WORDS)
    samples = []
    for i, q in enumerate(queries):
        scope = Scope(tenant_id=f"t{i % TENANTS}", user_id=f"u{(i * 7) % USERS}")
        vectors = Vectors(dense=q.tolist(), sparse=bm25.query(words[i]))
        started = time.perf_counter()
        await store.hybrid_query(scope, vectors, limit=10, explain=ranks)
        samples.append((time.perf_counter() - started) * 1e3)
    return percentiles(samples).model_dump()


async def _recall_latency(store: Store, rng: np.random.Generator, bm25: Bm25Encoder, settings: Settings,
                          n: int) -> dict[str, Any]:
    samples = []
    hits = 0
    words = _words(rng, n, QUERY_WORDS)
    for i, q in enumerate(_unit(rng, n)):
        retrieval = Retrieval(store, PrecomputedEmbedder(q.tolist()), bm25, settings)
        request = RecallRequest(query=f"what about {words[i]}?", user_id=f"u{(i * 7) % USERS}")
        started = time.perf_counter()
        found = (await search(retrieval, f"t{i % TENANTS}", request)).hits
        samples.append((time.perf_counter() - started) * 1e3)
        hits += len(found)
    # A user holds entries/10,000 entries: one at 10k, a hundred at 1M, so the small sizes return fewer hits.
    return {**percentiles(samples).model_dump(), "hits": hits / n}


async def run(sizes: list[int], settings: Settings, queries: int = QUERIES) -> dict[str, Any]:
    """Grow one Edge shard through `sizes`, measuring at each (`queries` per figure); then qdrant-client local mode
    at the smallest."""
    rng = np.random.default_rng(7)
    bm25 = Bm25Encoder(settings.bm25_language)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="engram-scale-") as tmp:
        folder = Path(tmp) / "edge"
        rss_before = _rss_mb()
        store = EdgeStore.open(folder, DIM, indexing=True)
        have = 0
        for size in sorted(sizes):
            upsert_s = await _fill(store, bm25, rng, have, size)
            added = size - have
            have = size
            started = time.perf_counter()
            await store.optimize()
            index_s = time.perf_counter() - started
            # The store is memory-mapped: right after the build its new segments are not in the page cache.
            # That first pass is reported as cold; the figures after it are a running service's (files cached).
            cold = await _recall_latency(store, rng, bm25, settings, queries)
            _read_into_page_cache(folder)
            await _query_latency(store, rng, bm25, queries)
            row = {"backend": "qdrant-edge", "entries": size, "upsert_per_s": added / upsert_s,
                   "index_build_s": index_s, "recall_cold_p50_ms": cold["p50"],
                   "store_query_ms": await _query_latency(store, rng, bm25, queries),
                   "store_ranked_ms": await _query_latency(store, rng, bm25, queries, ranks=True),
                   "recall_ms": await _recall_latency(store, rng, bm25, settings, queries),
                   "build_rss_mb": _rss_mb() - rss_before, "disk_mb": _disk_mb(folder)}
            await store.close()  # as a restarted service would find it
            service = _service_memory(folder)
            rows.append({**row, "rss_mb": service["rss_mb"], "anon_mb": service["anon_mb"]})
            store = EdgeStore.open(folder, DIM, indexing=True)
        await store.close()
        smallest = min(sizes)
        local = await ClientStore.open(AsyncQdrantClient(location=":memory:"), "scale", DIM)
        upsert_s = await _fill(local, bm25, np.random.default_rng(7), 0, smallest)
        await _query_latency(local, rng, bm25, queries)
        rows.append({"backend": "qdrant-client local", "entries": smallest, "upsert_per_s": smallest / upsert_s,
                     "index_build_s": 0.0, "recall_cold_p50_ms": None,
                     "store_query_ms": await _query_latency(local, rng, bm25, queries),
                     "store_ranked_ms": await _query_latency(local, rng, bm25, queries, ranks=True),
                     "recall_ms": await _recall_latency(local, rng, bm25, settings, queries), "build_rss_mb": None,
                     "disk_mb": None, "rss_mb": None, "anon_mb": None})
        await local.close()
    edge = [r for r in rows if r["backend"] == "qdrant-edge"]
    largest = max(edge, key=lambda r: r["entries"])
    return {"rows": rows,
            "p50_ratio_largest_to_smallest": largest["recall_ms"]["p50"] / edge[0]["recall_ms"]["p50"],
            "rss_mb_per_100k": largest["rss_mb"] / (largest["entries"] / 100_000),
            "anon_mb_per_100k": largest["anon_mb"] / (largest["entries"] / 100_000),
            "build_rss_mb_per_100k": largest["build_rss_mb"] / (largest["entries"] / 100_000),
            "disk_mb_per_100k": largest["disk_mb"] / (largest["entries"] / 100_000)}
