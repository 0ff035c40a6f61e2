"""A store that cannot answer is `unavailable` (retried), never a malformed request (dead-lettered): a Qdrant server
that is down or stops answering, a Qdrant Edge shard that is closed; and a hung engine holds only its own threads."""
import asyncio
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from engram_client.errors import EngramError, Unavailable
from shared.messaging.nats_server import free_port
from shared.settings import Settings
from shared.store import (
    ClientStore,
    EdgeStore,
    MemoryEntry,
    Scope,
    SparseVector,
    StoredEntry,
    Vectors,
    builds,
    edge_calls,
)
from tests.support.store import silent_server

NOW = datetime(2024, 1, 1, tzinfo=UTC)


async def test_every_call_to_an_unreachable_server_is_unavailable() -> None:
    """Every store call to a Qdrant server nobody listens on, opening included, raises Unavailable naming the call
    that got no answer."""
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


def _item(entry_id: str = "00000000-0000-0000-0000-000000000001", dense: list[float] | None = None) -> StoredEntry:
    entry = MemoryEntry(id=entry_id, tenant_id="t", conversation_id="c", text="x", occurred_at=NOW, created_at=NOW,
                        updated_at=NOW)
    return StoredEntry(entry=entry, vectors=Vectors(dense=dense or [1.0, 0.0],
                                                    sparse=SparseVector(indices=[1], values=[1.0])))


async def test_a_server_that_stops_answering_fails_each_call_within_the_timeout(tmp_path: Path) -> None:
    """Against a Qdrant server that accepts connections and never answers, each query, upsert and count fails as
    Unavailable soon after the 1 s timeout."""
    settings = Settings(data_dir=tmp_path, qdrant_url="http://127.0.0.1:1", qdrant_timeout_s=1)
    with silent_server() as port:
        client = builds.server_client(settings.model_copy(update={"qdrant_url": f"http://127.0.0.1:{port}"}))
        store = ClientStore(client, "engram_memory")  # as if opened while the server was up
        scope = Scope(tenant_id="t")
        try:
            for call in (lambda: store.hybrid_query(scope, _item().vectors, limit=3),
                         lambda: store.upsert([_item()]), lambda: store.count(scope)):
                # The client's own timeout ends the call (the cause is a Timeout, not the guard's TimeoutError);
                # the guard only turns a hang into a failure.
                with pytest.raises(Unavailable, match=r"Qdrant did not answer .*Timeout") as refused:
                    await asyncio.wait_for(call(), 30)
                assert refused.value.retryable and refused.value.code == "unavailable"
        finally:
            await store.close()


async def test_a_closed_edge_store_is_unavailable_until_it_adopts_its_shard_again(tmp_path: Path) -> None:
    """Every call on a closed Edge store raises Unavailable (closing twice is harmless), and once it adopts its shard
    again it has its data and takes writes."""
    store = EdgeStore.open(tmp_path / "qdrant", 2)
    scope = Scope(tenant_id="t")
    await store.upsert([_item()])
    await store.close()
    await store.close()  # closing twice is harmless
    assert store.closed
    for call in (lambda: store.count(scope), lambda: store.upsert([_item()]), lambda: store.scroll(scope),
                 lambda: store.hybrid_query(scope, _item().vectors, limit=3), lambda: store.tenants(),
                 lambda: store.delete(scope, [_item().entry.id])):
        with pytest.raises(Unavailable, match="is closed"):
            await call()
    await store.adopt(EdgeStore.open(tmp_path / "qdrant", 2))  # the store is back: same folder, same data
    try:
        assert not store.closed and await store.count(scope) == 1
        await store.upsert([_item("00000000-0000-0000-0000-000000000002")])
        assert await store.count(scope) == 2
    finally:
        await store.close()


async def test_a_shard_closed_under_the_store_is_unavailable_and_a_bug_is_not(tmp_path: Path) -> None:
    """A wrong vector size surfaces as a plain error rather than an EngramError, while a shard closed under a view
    makes that view's calls Unavailable."""
    store = EdgeStore.open(tmp_path / "qdrant", 2)
    view = store.view()  # shares the shard: the engine itself reports it closed
    try:
        with pytest.raises(Exception, match="Vector dimension error") as bug:
            await store.upsert([_item(dense=[1.0, 0.0, 0.0])])
        assert not isinstance(bug.value, EngramError)  # a wrong vector size is no outage: retrying cannot help
        await store.close()
        with pytest.raises(Unavailable, match="Shard is not initialized"):
            await view.count(Scope(tenant_id="t"))
    finally:
        await store.close()


async def test_engine_calls_that_hang_hold_only_the_engines_threads() -> None:
    """Edge calls that hang fill only the engine's own threads: asyncio's default pool still answers, and a queued
    call cancelled by its deadline never runs."""
    release = threading.Event()
    ran: list[int] = []

    def hang(i: int) -> None:
        release.wait(30)
        ran.append(i)

    hung = [asyncio.ensure_future(edge_calls.run(hang, i)) for i in range(edge_calls.EDGE_THREADS)]
    queued = asyncio.ensure_future(edge_calls.run(ran.append, -1))
    try:
        # asyncio's default pool (DNS, BM25, the rest of the process) is untouched
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 5) == "free"
        with pytest.raises(TimeoutError):  # what a recall's deadline does to a call queued behind them
            await asyncio.wait_for(queued, 0.2)
    finally:
        release.set()
        await asyncio.gather(*hung)
    await edge_calls.run(ran.append, -2)
    assert -1 not in ran and -2 in ran  # the cancelled call never ran
