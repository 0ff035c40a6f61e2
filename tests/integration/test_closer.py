"""The window closer's bookkeeping: it forgets windows another replica finished, and on stop it writes only what
this replica sealed, saying why when it cannot."""
import logging
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from shared.compress import OfflineCompressor
from shared.contract import Flush
from shared.embedding import Bm25Encoder, open_embedder
from shared.ingest.accept import accept_flush, accept_turn
from shared.ingest.closer import WindowCloser, _Backoff
from shared.ingest.policy import CloserPolicy, WindowPolicy
from shared.ingest.working_memory import WorkingMemory
from shared.ingest.writer import Writer
from shared.settings import Settings
from shared.store import EdgeStore
from tests.conftest import make_turn, unique
from tests.fakes.openai_server import FakeOpenAI, serve

POLICY = WindowPolicy(window_turns=4, recent_turns=20, max_pending_windows=32)
CLOSER = CloserPolicy(idle_timeout_s=300, sweep_interval_s=0.1, seal_grace_s=30, max_deliver=5)


@pytest.fixture
def failing_endpoint() -> Iterator[FakeOpenAI]:
    with serve() as fake:
        fake.fail_with = 503
        yield fake


async def _nothing(*_: object) -> None:
    return None


async def sealed_window(wm: WorkingMemory, tenant: str, conversation_id: str) -> None:
    await accept_turn(wm, tenant=tenant, turn=make_turn("I moved to Lisbon.", conversation_id=conversation_id),
                      seq=1, policy=POLICY)
    await accept_flush(wm, tenant=tenant, flush=Flush(conversation_id=conversation_id), seq=2)


async def test_backoff_is_forgotten_for_windows_another_replica_finished(
        replicas: tuple[WorkingMemory, WorkingMemory]) -> None:
    wm, _ = replicas
    tenant = unique("t")
    await sealed_window(wm, tenant, "c1")
    buffer = await wm.get(tenant, "c1")
    assert buffer is not None
    closer = WindowCloser(wm, None, _nothing, _nothing, CLOSER)  # type: ignore[arg-type]  # writes nothing here
    seqs = tuple(buffer.sealed[0].seqs)
    closer._backoff[(tenant, "c1", seqs)] = _Backoff(attempts=3, next_at=float("inf"))
    closer._backoff[(tenant, "c1", (99,))] = _Backoff(attempts=1, next_at=float("inf"))  # written elsewhere since
    assert closer._writable(tenant, "c1", buffer, datetime.now(UTC), 0.0) == []  # its own window backs off
    assert list(closer._backoff) == [(tenant, "c1", seqs)]


async def test_stopping_writes_only_this_replicas_windows_and_says_why_it_could_not(
        replicas: tuple[WorkingMemory, WorkingMemory], failing_endpoint: FakeOpenAI, tmp_path: object,
        caplog: pytest.LogCaptureFixture) -> None:
    wm, other = replicas
    tenant = unique("t")
    await sealed_window(wm, tenant, "mine")
    await sealed_window(other, tenant, "theirs")  # sealed by another replica, which is still running
    settings = Settings(embedder="openai", openai_base_url=failing_endpoint.url, openai_api_key="k",
                        embedding_dimensions=8)
    store = EdgeStore.open(tmp_path / "qdrant", 8)  # type: ignore[operator]
    embedder = open_embedder(settings)
    closer = WindowCloser(wm, Writer(OfflineCompressor(), embedder, Bm25Encoder(), store), _nothing, _nothing,
                          CLOSER)
    closer.notify(tenant, "mine")
    try:
        with caplog.at_level(logging.WARNING, logger="engram.closer"):
            await closer.drain(timeout_s=30)
    finally:
        await embedder.close()
        await store.close()
    assert [key[1] for key in closer._backoff] == ["mine"]  # "theirs" was left to its own replica
    assert "writing 1 windows failed (unavailable: embeddings endpoint answered 503)" in caplog.text
    theirs = await wm.get(tenant, "theirs")
    assert theirs is not None and len(theirs.sealed) == 1


async def test_stopping_without_nats_logs_the_reason_instead_of_raising(
        replicas: tuple[WorkingMemory, WorkingMemory], caplog: pytest.LogCaptureFixture) -> None:
    wm, _ = replicas
    tenant = unique("t")
    await sealed_window(wm, tenant, "c1")
    closer = WindowCloser(wm, None, _nothing, _nothing, CLOSER)  # type: ignore[arg-type]
    closer.notify(tenant, "c1")
    await wm.buffers._js._nc.close()  # the connection is gone as the replica stops
    with caplog.at_level(logging.WARNING, logger="engram.closer"):
        await closer.drain(timeout_s=5)
    assert "were not all written before stopping" in caplog.text and "ConnectionClosedError" in caplog.text
