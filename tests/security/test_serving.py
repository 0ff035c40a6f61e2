"""deploy/'s configuration serves: under its own NATS user in the ENGRAM account, engram ingests, recalls, lists,
consolidates, forgets, dead-letters and publishes events for two tenants without one permission violation, and
neither tenant sees the other's memories, events, dead letters or replies."""
import logging

import pytest
from nats.aio.msg import Msg

from engram_client import MemoryClient
from engram_client.contract import RecallResponse
from services.stack import Running
from tests.support.attack import Tenants
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.secured import Deployment, Raw, raw
from tests.support.turns import conversation

QUESTION = "What is the pet called?"


async def _collect(conn: Raw, subject: str) -> list[Msg]:
    got: list[Msg] = []

    async def record(msg: Msg) -> None:
        got.append(msg)

    await conn.nc.subscribe(subject, cb=record)
    return got


async def _recalled(client: MemoryClient, name: str) -> RecallResponse:
    return await eventually(lambda: client.recall(QUESTION, k=10),
                            lambda reply: any(name in e.text for e in reply.entries), timeout_s=60)


async def test_engram_serves_every_tenant_and_keeps_them_apart(deployment: Deployment, stack: Running,
                                                               tenants: Tenants,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """Two tenants each store a pet; each recalls and lists only its own; the victim consolidates and forgets (lease,
    jobs and erasure in stream, KV and store all under engram's user); a malformed turn is dead-lettered where only
    its tenant reads it; each tenant's events and dead letters reach it and not the other; and the server logged no
    permission violation of engram's account."""
    caplog.set_level(logging.WARNING)
    pets = {tenants.victim: ("Kiwi", "parrot"), tenants.bystander: ("Sheldon", "tortoise")}
    raws = {tenant: await raw(deployment, deployment.security(tenant), tenant) for tenant in pets}
    events = {tenant: await _collect(conn, f"mem.{tenant}.events.>") for tenant, conn in raws.items()}
    dead = {tenant: await _collect(conn, f"mem.dlq.{tenant}.>") for tenant, conn in raws.items()}
    for conn in raws.values():
        await conn.subscribed()
    clients = {tenant: await deployment.client(tenant) for tenant in pets}
    conversation_id = unique("pets-")
    try:
        for tenant, (name, animal) in pets.items():
            await clients[tenant].publish_turns(conversation(
                [("Ana", f"My {animal} is called {name} and loves mornings."), ("Bot", f"{name} sounds lovely.")],
                conversation_id=conversation_id))
            await clients[tenant].flush(conversation_id)
        for tenant, (name, _) in pets.items():
            found = await _recalled(clients[tenant], name)
            others = [n for t, (n, _) in pets.items() if t != tenant]
            assert all(o not in found.context and all(o not in e.text for e in found.entries) for o in others)
            listed = await clients[tenant].entries(op="list")
            assert listed.entries and all(o not in e.text for e in listed.entries for o in others)
        assert (await clients[tenants.victim].consolidate()).error is None
        receipt = await clients[tenants.victim].forget(conversation_id=conversation_id)
        assert receipt.verified
        assert all("Kiwi" not in e.text for e in (await clients[tenants.victim].recall(QUESTION, k=10)).entries)
        assert any("Sheldon" in e.text for e in (await clients[tenants.bystander].recall(QUESTION, k=10)).entries)
        await raws[tenants.victim].nc.jetstream().publish(f"mem.{tenants.victim}.turns", b"not json", timeout=10)
        await eventually(lambda: dead[tenants.victim], timeout_s=30)
        assert [m.subject for m in dead[tenants.victim]] == [f"mem.dlq.{tenants.victim}.ingestor"]
        assert dead[tenants.bystander] == []
        for tenant, seen in events.items():
            await eventually(lambda seen=seen, tenant=tenant: any(
                m.subject == f"mem.{tenant}.events.entry_created" for m in seen), timeout_s=30)
            assert all(m.subject.startswith(f"mem.{tenant}.events.") for m in seen)
    finally:
        for client in clients.values():
            await client.close()
        for conn in raws.values():
            await conn.nc.close()
    violations = [line for line in deployment.log().splitlines() if "violation" in line.lower()]
    assert violations == [], "\n".join(violations)
    assert "Permissions Violation" not in caplog.text
