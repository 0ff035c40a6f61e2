"""Tenant isolation: with two tenants holding similar content, nothing crosses between them."""
import json

import nats
import pytest

from engram_client import MemoryClient, subjects
from engram_client.errors import Forbidden, NotFound
from services.stack import Running
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.turns import conversation, make_turn

LINES = [("Ana", "I moved to Lisbon last spring."), ("Bo", "Which neighbourhood?"),
         ("Ana", "Alfama, near the castle."), ("Bo", "Lovely, I visited it once.")]


async def test_recall_entries_and_events_never_cross_tenants(stack: Running) -> None:
    """Two tenants with the same conversation and turn ids get distinct entry ids, and neither's recall, listing,
    get, history, working memory or events shows the other's content."""
    a, b = unique("acme"), unique("globex")
    nc = await nats.connect(stack.nats_url)
    seen: dict[str, list[str]] = {a: [], b: []}
    for tenant in (a, b):
        async def on_event(msg: nats.aio.msg.Msg, tenant: str = tenant) -> None:
            seen[tenant].append(json.loads(msg.data)["tenant_id"])
        await nc.subscribe(subjects.events("mem", tenant), cb=on_event)
    async with await MemoryClient.connect(stack.nats_url, a) as ca, \
            await MemoryClient.connect(stack.nats_url, b) as cb:
        # Same conversation and turn ids in both tenants: ids must not collide either.
        await ca.publish_turns(conversation(LINES, conversation_id="shared-conv"))
        await cb.publish_turns(conversation([(s, t.replace("Lisbon", "Porto").replace("Alfama", "Ribeira"))
                                             for s, t in LINES], conversation_id="shared-conv"))
        await ca.flush("shared-conv")
        await cb.flush("shared-conv")
        ra = await eventually(lambda: ca.recall("Where did Ana move?"), lambda r: bool(r.entries))
        rb = await eventually(lambda: cb.recall("Where did Ana move?"), lambda r: bool(r.entries))
        assert all("Lisbon" in e.text and "Porto" not in e.text for e in ra.entries)
        assert all("Porto" in e.text and "Lisbon" not in e.text for e in rb.entries)
        assert {e.id for e in ra.entries}.isdisjoint({e.id for e in rb.entries})
        la, lb = await ca.entries(op="list"), await cb.entries(op="list")
        assert la.entries and lb.entries
        assert all("Lisbon" in e.text for e in la.entries) and all("Porto" in e.text for e in lb.entries)
        # Asking for the other tenant's entry by id finds nothing.
        assert (await ca.entries(op="get", ids=[lb.entries[0].id])).entries == []
        with pytest.raises(NotFound):
            await ca.entries(op="history", ids=[lb.entries[0].id])
        # Working memory is per tenant too.
        wm = await ca.recall("castle", conversation_id="shared-conv", include_working_memory=True)
        assert all("Porto" not in t.text and "Ribeira" not in t.text for t in wm.working_memory)
        await eventually(lambda: seen, lambda s: bool(s[a]) and bool(s[b]))
    assert set(seen[a]) == {a} and set(seen[b]) == {b}
    await nc.close()


async def test_a_payload_naming_another_tenant_is_refused(stack: Running, client: MemoryClient) -> None:
    """A recall naming another tenant raises Forbidden, a turn naming one is dead-lettered as forbidden, and neither
    tenant gets an entry from it."""
    with pytest.raises(Forbidden, match="someone-else"):
        await client.recall("anything", tenant_id="someone-else")
    turn = make_turn("secret plans", conversation_id="x1").model_copy(update={"tenant_id": "someone-else"})
    await client.publish_turn(turn)
    await client.flush("x1")
    from tests.support.dead_letters import dead_letters

    [letter] = await dead_letters(stack.nats_url, client.tenant)
    assert (letter.headers or {})["Engram-Error-Code"] == "forbidden"
    async with await MemoryClient.connect(stack.nats_url, "someone-else") as other:
        assert (await other.entries(op="list")).entries == []
    assert (await client.entries(op="list")).entries == []


async def test_working_memory_is_scoped_to_the_requests_user(client: MemoryClient) -> None:
    """A recall that names a conversation gets its recent turns only if they are the asking user's."""
    mine = conversation([("Ana", "My new PIN is 4821, do not tell anyone."), ("Bot", "Noted.")],
                        conversation_id="private-1", user_id="ana")
    await client.publish_turns(mine)
    found = await eventually(lambda: client.recall("PIN", conversation_id="private-1", user_id="ana",
                                                   include_working_memory=True),
                             lambda r: len(r.working_memory) == 2)
    assert "4821" in found.context
    other = await client.recall("PIN", conversation_id="private-1", user_id="mallory", include_working_memory=True)
    assert other.working_memory == [] and "4821" not in other.context
    tenant_wide = await client.recall("PIN", conversation_id="private-1", include_working_memory=True)
    assert len(tenant_wide.working_memory) == 2  # no user named: the tenant's own service sees its conversation
