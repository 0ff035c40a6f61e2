"""Events are at least once, with an id that is the same every time the same change is announced."""
import json
from typing import Any

import nats
import pytest

from engram_client import MemoryClient, subjects, wait_until_stored
from engram_client.contract import EntryCreated, event_id
from services.stack import running
from shared.ingest import batch
from shared.settings import Settings
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.turns import conversation


async def test_an_event_sent_again_after_a_failure_has_the_same_event_id(
        e2e_settings: Settings, nats_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window's entry is stored and announced, then marking the window done fails (as a crash there would):
    the window is written again and announced again, and both announcements carry one event_id."""
    tenant = unique("t")
    original = batch.complete
    failed: list[str] = []

    async def complete_fails_once(*args: Any) -> Any:
        if not failed:
            failed.append("once")
            raise ConnectionError("lost the connection right after announcing")
        return await original(*args)

    monkeypatch.setattr(batch, "complete", complete_fails_once)
    nc = await nats.connect(nats_url)
    received: list[dict[str, Any]] = []

    async def on_event(msg: Any) -> None:
        received.append(json.loads(msg.data))

    await nc.subscribe(subjects.events("mem", tenant), cb=on_event)
    turns = conversation([("Ana", "We adopted a puppy called Biscuit."), ("Bo", "What breed is she?")],
                         conversation_id="ev1")
    try:
        async with running(e2e_settings, nats_url=nats_url) as state, \
                await MemoryClient.connect(state.nats_url, tenant) as client:
            await client.publish_turns(turns)
            await client.flush("ev1")
            await wait_until_stored(client, turns, timeout_s=30)
            await eventually(lambda: received, lambda r: len(r) >= 2, timeout_s=30)
            buffer = await eventually(lambda: state.ingestor_deps[0].working_memory.get(tenant, "ev1"),
                                      lambda b: b is not None and not b.sealed)
            listed = await client.entries(op="list", conversation_id="ev1", kind="episodic")
    finally:
        await nc.close()
    assert failed and buffer is not None
    [entry] = listed.entries  # the episode (the window also stated a fact, announced the same way)
    events = [e for e in map(EntryCreated.model_validate, received) if e.entry_id == entry.id]
    assert len(events) == 2 and len({e.event_id for e in events}) == 1  # announced twice, one id to de-duplicate on
    assert events[0].entry_id == entry.id and events[0].event_id == event_id("entry_created", entry.id)
