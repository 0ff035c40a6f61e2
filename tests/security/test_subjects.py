"""Subjects: a product publishes and subscribes only to its own tenant's, and nothing of engram's or another tenant's
traffic exists in its account at all (each product is a NATS account of its own)."""
import asyncio

import pytest
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from engram_client import subjects
from engram_client.contract import RecallRequest
from services.stack import Running
from shared.messaging import streams
from shared.working_memory.buckets import bucket_names
from tests.support.attack import Tenants, VictimMemory
from tests.support.polling import eventually
from tests.support.secured import Deployment, raw
from tests.support.tenant_state import settled_state
from tests.support.turns import make_turn


def _denied_publishes(victim: str, attacker: str) -> list[str]:
    buffers, _, open_index = bucket_names("mem")
    return [subjects.turns("mem", victim), subjects.flush("mem", victim), subjects.recall("mem", victim),
            subjects.forget("mem", victim), subjects.entries("mem", victim), subjects.consolidate("mem", victim),
            f"mem.{victim}.events.entry_created", f"mem.{attacker}.events.entry_created",  # forging events
            subjects.dlq("mem", victim, "ingestor"), "$JS.API.INFO", "$JS.API.STREAM.NAMES",
            f"$JS.API.STREAM.DELETE.{streams.turns_stream('mem', victim)}",
            f"$JS.API.STREAM.PURGE.{streams.turns_stream('mem', victim)}",
            f"$KV.{open_index}.{victim}.x", f"$KV.{buffers}.{victim}.x", subjects.rebuild("mem"),
            subjects.tenant_streams("mem"), "_INBOX.anything", "$SYS.REQ.SERVER.PING"]


async def test_a_product_cannot_publish_outside_its_tenant(
        deployment: Deployment, stack: Running, tenants: Tenants, victim_memory: VictimMemory) -> None:
    """Every publish of the attacker outside its six subjects (another tenant's, engram's events, dead letters, the
    JetStream and key-value APIs, engram's own subjects, the system account's) is refused by the server with a
    permissions violation, and the victim's state is the same afterwards."""
    victim, attacker = tenants.victim, tenants.attacker
    before = await settled_state(stack.ingestor_deps[0].nc, stack.store, victim)
    hostile = await raw(deployment, deployment.security(attacker), "attacker")
    try:
        for subject in _denied_publishes(victim, attacker):
            await hostile.nc.publish(subject, make_turn("hostile").model_dump_json().encode())
            await eventually(lambda: hostile.errors, lambda errors, s=subject: any(
                f'permissions violation for publish to "{s}"'.lower() in e.lower() for e in errors), timeout_s=5)
    finally:
        await hostile.nc.close()
    assert await settled_state(stack.ingestor_deps[0].nc, stack.store, victim) == before


@pytest.mark.parametrize("subject", ["mem.>", "mem.{victim}.>", "mem.{victim}.events.>", "mem.dlq.>",
                                     "mem.dlq.{victim}.>", "_INBOX_{victim}.>", "$JS.API.>", "$KV.>", "_ENGRAM.>",
                                     "$SYS.>", ">"])
async def test_a_product_cannot_subscribe_outside_its_tenant(deployment: Deployment, tenants: Tenants,
                                                             subject: str) -> None:
    """Each subscription outside the attacker's own inboxes, events and dead letters is refused with a permissions
    violation."""
    wanted = subject.format(victim=tenants.victim)
    hostile = await raw(deployment, deployment.security(tenants.attacker), "attacker")
    try:
        await hostile.nc.subscribe(wanted)
        await eventually(lambda: hostile.errors, lambda errors: any(
            f'permissions violation for subscription to "{wanted}"'.lower() in e.lower() for e in errors),
            timeout_s=5)
    finally:
        await hostile.nc.close()


async def test_nothing_of_another_tenant_reaches_a_product_even_on_its_own_subjects(
        deployment: Deployment, stack: Running, tenants: Tenants, victim_memory: VictimMemory) -> None:
    """The attacker listens on everything its account may hold (its inboxes, events and dead letters) while the
    victim recalls, forgets, consolidates and gets an entry stored: only the attacker's own traffic arrives."""
    hostile = await raw(deployment, deployment.security(tenants.attacker), "attacker")
    got: list[str] = []

    async def record(msg: Msg) -> None:
        got.append(msg.subject)

    for pattern in ("_INBOX.>", f"_INBOX_{tenants.attacker}.>", f"mem.{tenants.attacker}.events.>",
                    f"mem.dlq.{tenants.attacker}.>"):
        await hostile.nc.subscribe(pattern, cb=record)
    await hostile.subscribed()
    try:
        async with await deployment.client(tenants.victim) as victim:
            await victim.recall("What is the parrot called?")
            turn = make_turn("I adopted a cat called Miso.", conversation_id="v-cat")
            await victim.publish_turn(turn)
            await victim.flush("v-cat")
            events = await victim.events()
            await eventually(lambda: victim.entries(op="list", conversation_id="v-cat"),
                             lambda listed: bool(listed.entries), timeout_s=60)
            await events.close()
            await victim.consolidate()
        await hostile.nc.flush()
        assert got == [] and not hostile.errors
    finally:
        await hostile.nc.close()


async def test_a_product_has_no_jetstream_and_reaches_no_engram_subject(deployment: Deployment,
                                                                       tenants: Tenants) -> None:
    """Even where its permissions would let it publish (engram's own user could), a product's account holds no
    JetStream and imports none of engram's internal subjects: its own request subjects answer, nothing else does."""
    product = await raw(deployment, deployment.security(tenants.bystander), "bystander")
    try:
        answer = await product.nc.request(subjects.recall("mem", tenants.bystander),
                                          RecallRequest(query="anything").model_dump_json().encode(), timeout=10)
        assert b"schema_version" in answer.data
        with pytest.raises((NoRespondersError, NatsTimeout)):
            await product.nc.request("$JS.API.INFO", b"", timeout=1)  # refused by its permissions
        await asyncio.sleep(0)  # nothing to wait for: the refusal above is the server's
    finally:
        await product.nc.close()
