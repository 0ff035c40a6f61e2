"""A Qdrant server that does not answer is `unavailable` (retried), never a malformed request (dead-lettered)."""
from datetime import UTC, datetime

import pytest
from qdrant_client import AsyncQdrantClient

from shared.errors import Unavailable
from shared.messaging.nats_server import free_port
from shared.store import ClientStore, MemoryEntry, Scope, SparseVector, StoredEntry, Vectors

NOW = datetime(2024, 1, 1, tzinfo=UTC)


async def test_every_call_to_an_unreachable_server_is_unavailable() -> None:
    client = AsyncQdrantClient(url=f"http://127.0.0.1:{free_port()}", timeout=2, check_compatibility=False)
    store = ClientStore(client, "engram_memory")  # as if opened while the server was up
    entry = MemoryEntry(id="00000000-0000-0000-0000-000000000001", tenant_id="t", conversation_id="c", text="x",
                        occurred_at=NOW, created_at=NOW, updated_at=NOW)
    vectors = Vectors(dense=[1.0, 0.0], sparse=SparseVector(indices=[1], values=[1.0]))
    scope = Scope(tenant_id="t")
    try:
        with pytest.raises(Unavailable, match="Qdrant did not answer an upsert"):
            await store.upsert([StoredEntry(entry=entry, vectors=vectors)])
        with pytest.raises(Unavailable, match="a hybrid query"):
            await store.hybrid_query(scope, vectors, limit=3)
        with pytest.raises(Unavailable, match="a scroll"):
            await store.scroll(scope)
        with pytest.raises(Unavailable, match="a count"):
            await store.count(scope)
        with pytest.raises(Unavailable):
            await ClientStore.open(client, "engram_memory", 2)
    finally:
        await store.close()
