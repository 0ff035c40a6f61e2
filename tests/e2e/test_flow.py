"""Turns published through NATS come back from recall, with working memory, events and entries."""
import json
from datetime import UTC, datetime, timedelta

import nats

from engram_client import MemoryClient, subjects
from services.stack import Running
from tests.support.polling import eventually
from tests.support.turns import conversation, make_turn


async def test_flushed_turns_are_recalled_by_meaning(client: MemoryClient) -> None:
    """Turns that are published and then flushed come back from recall for the same tenant."""
    seq = await client.publish_turn(make_turn("I moved to Lisbon in May 2023.", conversation_id="c1"))
    assert seq > 0
    await client.flush(conversation_id="c1")
    found = await eventually(lambda: client.recall("Where does the user live?"), lambda r: bool(r.entries))
    assert "Lisbon" in found.entries[0].text


async def test_a_window_closes_at_n_turns_and_working_memory_is_returned(client: MemoryClient,
                                                                         stack: Running) -> None:
    """A window closes by itself after window_turns turns, its entry holding exactly those turns, and recall returns
    the turn past it as working memory."""
    window = stack.ingestor_deps[0].settings.window_turns
    turns = conversation([("Ana", f"Fact number {i}: I like thing {i}.") for i in range(window + 1)],
                         conversation_id="c2")
    await client.publish_turns(turns)
    found = await eventually(lambda: client.recall("What does Ana like?", conversation_id="c2",
                                                   include_working_memory=True), lambda r: bool(r.entries))
    assert found.entries[0].source_turn_ids == [t.turn_id for t in turns[:window]]
    assert [t.turn_id for t in found.working_memory][-1] == turns[-1].turn_id
    assert "Recent turns:" in found.context


async def test_recent_turns_come_back_in_ts_order_when_timestamps_disagree_with_arrival(
        client: MemoryClient) -> None:
    """Turns published in an order their timestamps contradict come back as working memory ordered by `ts`."""
    start = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    turns = [make_turn(f"Line said at minute {m}.", conversation_id="c-ts", turn_id=f"ts-{m}",
                       ts=start + timedelta(minutes=m)) for m in (20, 0, 10)]
    await client.publish_turns(turns)  # fewer than a window: they stay in working memory
    found = await eventually(lambda: client.recall("what was said?", conversation_id="c-ts",
                                                   include_working_memory=True),
                             lambda r: len(r.working_memory) == len(turns))
    assert [t.turn_id for t in found.working_memory] == ["ts-0", "ts-10", "ts-20"]
    assert [t.ts for t in found.working_memory] == sorted(t.ts for t in turns)


async def test_entry_created_events_and_entries_listing(client: MemoryClient, stack: Running) -> None:
    """Storing a turn publishes an entry_created event on the tenant's events subject, and the entry it names is the
    one listed and fetched by id."""
    nc = await nats.connect(stack.nats_url)
    sub = await nc.subscribe(subjects.events("mem", client.tenant))
    await client.publish_turn(make_turn("Biscuit chewed the sofa again.", conversation_id="c3"))
    await client.flush("c3")
    msg = await sub.next_msg(timeout=20)
    event = json.loads(msg.data)
    assert msg.subject == f"mem.{client.tenant}.events.entry_created"
    assert event["tenant_id"] == client.tenant and event["conversation_id"] == "c3"
    listed = await client.entries(op="list", conversation_id="c3")
    assert [e.id for e in listed.entries] == [event["entry_id"]]
    got = await client.entries(op="get", ids=[event["entry_id"]])
    assert "Biscuit" in got.entries[0].text
    await nc.close()


async def test_a_redelivered_turn_after_its_window_was_stored_is_ignored(client: MemoryClient,
                                                                         stack: Running) -> None:
    """What a crash between the buffer write and the ack looks like: the same turn arrives again."""
    turns = conversation([("Ana", "I collect vintage cameras."), ("Bo", "Which one is your favourite?")],
                         conversation_id="c4")
    await client.publish_turns(turns)
    await client.flush("c4")
    first = await eventually(lambda: client.entries(op="list", conversation_id="c4"), lambda r: bool(r.entries))
    nc = await nats.connect(stack.nats_url)
    # A new Nats-Msg-Id gets past JetStream's dedup window, as a redelivery would.
    await nc.jetstream().publish(f"mem.{client.tenant}.turns", turns[0].model_dump_json().encode(),
                                 headers={"Nats-Msg-Id": "redelivery-1"})
    await nc.close()
    await client.flush("c4")
    marker = make_turn("A later turn proves the redelivery was processed.", conversation_id="c4")
    await client.publish_turn(marker)
    await client.flush("c4")
    later = await eventually(lambda: client.entries(op="list", conversation_id="c4"), lambda r: len(r.entries) == 2)
    sources = sorted(t for e in later.entries for t in e.source_turn_ids)
    assert sources == sorted([turns[0].turn_id, turns[1].turn_id, marker.turn_id])
    assert first.entries[0].id in {e.id for e in later.entries}


async def test_entries_are_listed_page_by_page(client: MemoryClient) -> None:
    """Listing entries one per page returns each entry exactly once, and a conversation with no entries gives an
    empty page with no cursor."""
    turns = conversation([("Ana", f"Note {i}: remember item {i}.") for i in range(12)], conversation_id="pages")
    await client.publish_turns(turns)
    await client.flush("pages")
    await eventually(lambda: client.entries(op="list", conversation_id="pages"), lambda r: len(r.entries) == 3)
    seen, cursor = [], None
    while True:
        page = await client.entries(op="list", conversation_id="pages", limit=1, cursor=cursor)
        seen += [e.id for e in page.entries]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 3
    other = await client.entries(op="list", conversation_id="nobody", limit=5)
    assert other.entries == [] and other.next_cursor is None
