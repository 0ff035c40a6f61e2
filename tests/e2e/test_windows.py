"""Windows close on their own when idle, and an embedder outage delays entries without losing a turn."""
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from engram_client import MemoryClient, wait_until_stored
from services.stack import running
from shared.settings import Settings
from tests.fakes.openai_server import FakeOpenAI, serve
from tests.support.dead_letters import dead_letter_count
from tests.support.ids import unique
from tests.support.memory import stored_turn_ids
from tests.support.polling import eventually
from tests.support.turns import conversation, make_turn


async def test_an_idle_window_closes_without_flush_or_new_turns(client: MemoryClient) -> None:
    """A lone turn becomes recallable once its conversation goes idle, with no flush and no further turn."""
    await client.publish_turn(make_turn("I started learning Portuguese with an app.", conversation_id="idle-1"))
    # No flush, no further turn: the idle sweep (2 s in these tests) closes the window.
    found = await eventually(lambda: client.recall("What language is being learned?", conversation_id="idle-1"),
                             lambda r: bool(r.entries), timeout_s=30)
    assert "Portuguese" in found.entries[0].text


@pytest.fixture
def flaky_embeddings() -> Iterator[FakeOpenAI]:
    with serve() as fake:
        yield fake


async def test_an_embedder_outage_is_retried_and_loses_nothing(e2e_settings: Settings, nats_url: str,
                                                               flaky_embeddings: FakeOpenAI, tmp_path: Path) -> None:
    """While the embeddings endpoint answers 503, sealed windows stay in working memory and are retried, and once it
    recovers every turn is stored."""
    settings = e2e_settings.model_copy(update={
        "embedder": "openai", "openai_base_url": flaky_embeddings.url, "openai_api_key": "k",
        "embedding_dimensions": 32, "data_dir": tmp_path / "flaky"})
    tenant = unique("t")
    turns = conversation([("Ana", f"Detail {i}: something worth remembering.") for i in range(10)],
                         conversation_id="outage")
    flaky_embeddings.fail_with = 503
    async with running(settings, nats_url=nats_url) as state:
        async with await MemoryClient.connect(state.nats_url, tenant) as client:
            await client.publish_turns(turns)
            await client.flush("outage")
            wm = state.ingestor_deps[0].working_memory
            # While the endpoint fails, windows stay sealed in working memory and writes are retried.
            await eventually(lambda: wm.get(tenant, "outage"), lambda b: b is not None and len(b.sealed) == 3)
            await eventually(lambda: _failed_posts(flaky_embeddings), lambda n: n >= 2)
            flaky_embeddings.fail_with = None
            await wait_until_stored(client, turns, timeout_s=60)
        ids = await stored_turn_ids(state.store, tenant)
    assert sorted(ids) == sorted(t.turn_id for t in turns)


async def _failed_posts(fake: FakeOpenAI) -> int:
    return sum(1 for r in fake.requests if r["path"].endswith("/embeddings"))


async def test_back_pressure_holds_turns_in_the_stream_past_max_deliver_and_loses_none(
        e2e_settings: Settings, nats_url: str, flaky_embeddings: FakeOpenAI, tmp_path: Path) -> None:
    """With one window pending and the embedder down, later turns are nak'ed: they wait as long as it takes (more
    deliveries than max_deliver), are never dead-lettered, and are stored once writing works again."""
    settings = e2e_settings.model_copy(update={
        "embedder": "openai", "openai_base_url": flaky_embeddings.url, "openai_api_key": "k",
        "embedding_dimensions": 32, "data_dir": tmp_path / "held", "max_pending_windows": 1, "max_deliver": 1})
    tenant = unique("t")
    turns = conversation([("Ana", f"Detail {i}: something worth remembering.") for i in range(8)],
                         conversation_id="held")
    flaky_embeddings.fail_with = 503
    nc = await nats.connect(nats_url)
    try:
        async with running(settings, nats_url=nats_url) as state:
            async with await MemoryClient.connect(state.nats_url, tenant) as client:
                await client.publish_turns(turns)
                await client.flush("held")
                # Every held turn has been delivered more often than max_deliver (8 turns and a flush, then
                # another round of the 4 turns behind the pending window).
                await eventually(lambda: nc.jetstream().consumer_info(f"MEM_TURNS_{tenant}", "ingestor"),
                                 lambda info: (info.delivered.consumer_seq or 0) >= 9 + 4, timeout_s=60)
                assert await dead_letter_count(state.nats_url, tenant) == 0
                flaky_embeddings.fail_with = None
                await wait_until_stored(client, turns, timeout_s=120)
            ids = await stored_turn_ids(state.store, tenant)
    finally:
        await nc.close()
    assert sorted(ids) == sorted(t.turn_id for t in turns)
    assert await dead_letter_count(nats_url, tenant) == 0
