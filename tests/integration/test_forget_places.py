"""Forget reaches the places no recall sees: turns still queued in the stream and dead letters (no ingestor is
consuming here, so the turns stay queued), on a real nats-server and the real store."""
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engram_client import connection, subjects
from engram_client.contract import EntriesForgotten, Forget
from engram_client.errors import EngramError
from shared.consolidation.forget import Places, about, forget
from shared.messaging import nats_server, streams
from shared.store import EdgeStore, EntryFilter, MemoryEntry, Scope, SparseVector, StoredEntry, Vectors
from shared.working_memory import WorkingMemory
from tests.support.ids import unique
from tests.support.turns import make_turn

DIM = 8


@pytest.fixture
async def places(tmp_path: Path) -> AsyncIterator[Places]:
    server = nats_server.start(tmp_path / "nats")
    nc = await connection.connect(server.url, "test")
    store = EdgeStore.open(tmp_path / "qdrant", DIM)
    try:
        js = nc.jetstream()
        await streams.ensure(js, "mem")
        published: list[EntriesForgotten] = []

        async def publish(_: str, event: EntriesForgotten) -> None:
            published.append(event)

        yield Places(store=store, working_memory=await WorkingMemory.open(js, "mem"), js=js, prefix="mem",
                     publish=publish, dim=DIM)
    finally:
        await store.close()
        await nc.close()
        server.stop()


async def queued(places: Places, tenant: str, request: Forget) -> int:
    return len(await streams.matching(places.js, streams.turns_stream("mem", tenant), subjects.turns("mem", tenant),
                                      about(request)))


async def with_stream(places: Places, *tenants: str) -> None:
    """Make the tenants' turns streams (as the provisioner does on a tenant's first message)."""
    for tenant in tenants:
        await streams.ensure_tenant(places.js, "mem", tenant, streams.TurnsLimits())


async def test_queued_turns_and_dead_letters_of_the_user_are_erased_and_no_one_elses(places: Places) -> None:
    """Forgetting a user erases that user's queued turns and dead letters in the tenant, and leaves other users',
    other tenants' and unreadable dead letters."""
    tenant, other_tenant = unique("t"), unique("t")
    js = places.js
    await with_stream(places, tenant, other_tenant)
    for t, user, n in [(tenant, "ana", 3), (tenant, "bo", 2), (other_tenant, "ana", 2)]:
        for i in range(n):
            turn = make_turn(f"{user} says {i}", conversation_id=f"{user}-c", user_id=user)
            await js.publish(subjects.turns("mem", t), turn.model_dump_json().encode())
    bad = make_turn("bad", user_id="ana").model_dump_json().encode()
    await js.publish(subjects.dlq("mem", tenant, "ingestor"), bad)
    await js.publish(subjects.dlq("mem", tenant, "ingestor"), b"\xff not json")  # names nobody: stays

    receipt = await forget(places, tenant, Forget(user_id="ana"))

    assert receipt.verified and receipt.deleted.queued_turns == 3 and receipt.deleted.dead_letters == 1
    assert await queued(places, tenant, Forget(user_id="ana")) == 0
    assert await queued(places, tenant, Forget(user_id="bo")) == 2
    assert await queued(places, other_tenant, Forget(user_id="ana")) == 2
    left = await streams.matching(js, streams.dlq_stream("mem"), subjects.dlq("mem", tenant), lambda _: True)
    assert len(left) == 1


async def test_forgetting_a_conversation_erases_its_queued_flushes_too(places: Places) -> None:
    """Forgetting a conversation erases its queued turn and flush, and leaves another conversation's flush queued."""
    tenant = unique("t")
    await with_stream(places, tenant)
    await places.js.publish(subjects.turns("mem", tenant), make_turn("hi", conversation_id="c9").model_dump_json()
                            .encode())
    await places.js.publish(subjects.flush("mem", tenant), b'{"conversation_id": "c9"}')
    await places.js.publish(subjects.flush("mem", tenant), b'{"conversation_id": "c10"}')
    receipt = await forget(places, tenant, Forget(conversation_id="c9"))
    assert receipt.verified and receipt.deleted.queued_turns == 2
    assert len(await streams.matching(places.js, streams.turns_stream("mem", tenant), subjects.flush("mem", tenant),
                                      lambda _: True)) == 1


async def merged_pair(places: Places, tenant: str, user_id: str | None = "ana", second: str = "c2") -> None:
    """Ana's episode of conversation c1 keeps her near-duplicate episode of c2 (merged by a consolidation)."""
    now = datetime(2024, 5, 6, tzinfo=UTC)

    def episode(entry_id: str, conversation_id: str, turn: str, **merged: object) -> StoredEntry:
        entry = MemoryEntry(id=entry_id, tenant_id=tenant, user_id=user_id, conversation_id=conversation_id,
                            text="We booked the cabin by Lake Bled", occurred_at=now, created_at=now, updated_at=now,
                            source_turn_ids=[turn], keywords=[conversation_id]).model_copy(update=merged)
        return StoredEntry(entry=entry, vectors=Vectors(dense=[1.0] + [0.0] * (DIM - 1),
                                                        sparse=SparseVector(indices=[1], values=[1.0])))

    await places.store.upsert([
        episode(KEEPER, "c1", "c1-0", merged_from=[MEMBER], source_turn_ids=["c1-0", "c2-0"], keywords=["c1", "c2"],
                unmerged={"source_turn_ids": ["c1-0"], "keywords": ["c1"], "persons": [], "entities": []}),
        episode(MEMBER, second, "c2-0", merged_into=KEEPER)])


KEEPER, MEMBER = "00000000-0000-4000-8000-0000000000c1", "00000000-0000-4000-8000-0000000000c2"


async def test_forgetting_a_merged_conversation_takes_its_turns_out_of_the_episode_that_kept_them(
        places: Places) -> None:
    """Forgetting a conversation merged into another's episode takes its turns and keywords out of the keeper and
    unlinks the merge."""
    tenant = unique("t")
    await merged_pair(places, tenant)
    assert (await forget(places, tenant, Forget(conversation_id="c2"))).verified
    [keeper] = await places.store.get(Scope(tenant_id=tenant), [KEEPER])
    assert (keeper.source_turn_ids, keeper.keywords, keeper.merged_from) == (["c1-0"], ["c1"], [])


async def test_forgetting_the_conversation_of_a_keeper_makes_the_episode_it_hid_visible_again(
        places: Places) -> None:
    """Forgetting the keeper's conversation deletes the keeper and makes the merged episode it hid visible again with
    only its own turns."""
    tenant = unique("t")
    await merged_pair(places, tenant)
    assert (await forget(places, tenant, Forget(conversation_id="c1"))).verified
    visible = await places.store.scroll(Scope(tenant_id=tenant), entry_filter=EntryFilter(include_merged=False))
    assert [(e.id, e.source_turn_ids) for e in visible.entries] == [(MEMBER, ["c2-0"])]


async def test_forgetting_a_keeper_by_id_in_a_conversation_without_users_mends_its_member(places: Places) -> None:
    """Forgetting a keeper by entry id, where the conversation has no user, makes its merged member visible again
    with its own turns."""
    tenant = unique("t")
    await merged_pair(places, tenant, user_id=None, second="c1")  # one conversation, no user: it is the owner
    assert (await forget(places, tenant, Forget(entry_ids=[KEEPER]))).verified
    visible = await places.store.scroll(Scope(tenant_id=tenant), entry_filter=EntryFilter(include_merged=False))
    assert [(e.id, e.source_turn_ids) for e in visible.entries] == [(MEMBER, ["c2-0"])]


async def test_a_forget_cut_short_finishes_when_asked_again(places: Places, tmp_path: Path) -> None:
    """A forget that fails part-way (the store goes away after the user's queued turns were erased) has done part of
    its work and answers `unavailable`; asked again once the store is back, it finishes: the receipt counts what
    was left (the entry, not the turns already gone) and verifies, and another user's entry stays."""
    tenant = unique("t")
    now = datetime(2024, 5, 6, tzinfo=UTC)
    await with_stream(places, tenant)
    for i in range(3):
        turn = make_turn(f"ana says {i}", conversation_id="ana-c", user_id="ana")
        await places.js.publish(subjects.turns("mem", tenant), turn.model_dump_json().encode())

    def episode(entry_id: str, user_id: str) -> StoredEntry:
        entry = MemoryEntry(id=entry_id, tenant_id=tenant, user_id=user_id, conversation_id=f"{user_id}-c",
                            text=f"{user_id} booked the cabin by Lake Bled", occurred_at=now, created_at=now,
                            updated_at=now, source_turn_ids=[f"{user_id}-0"])
        return StoredEntry(entry=entry, vectors=Vectors(dense=[1.0] + [0.0] * (DIM - 1),
                                                        sparse=SparseVector(indices=[1], values=[1.0])))

    await places.store.upsert([episode(KEEPER, "ana"), episode(MEMBER, "bo")])
    store = places.store
    assert isinstance(store, EdgeStore)
    await store.close()
    with pytest.raises(EngramError) as cut:
        await forget(places, tenant, Forget(user_id="ana"))
    assert cut.value.code == "unavailable"
    assert await queued(places, tenant, Forget(user_id="ana")) == 0  # that part was done

    await store.adopt(EdgeStore.open(tmp_path / "qdrant", DIM))
    receipt = await forget(places, tenant, Forget(user_id="ana"))
    assert receipt.verified
    assert (receipt.deleted.entries, receipt.deleted.queued_turns) == (1, 0)
    left = await store.scroll(Scope(tenant_id=tenant), limit=10)
    assert [e.user_id for e in left.entries] == ["bo"]
