"""Reply subjects: a product names where answers go, and none of its choices may make engram or JetStream write into
engram's own state or another tenant's.

Each product is a NATS account of its own: whatever reply subject it names lies in its own account, so JetStream's
acknowledgement and engram's answer land there (engram sees the `_R_.…` subject NATS maps it to). And engram answers
only inboxes, whatever account a request comes from: a request from engram's own account naming one of its buckets
as the reply is not answered at all, and counted.
"""
import json

import pytest
from nats.errors import TimeoutError as NatsTimeout

from engram_client import subjects, wait_until_stored
from engram_client.contract import EntriesRequest, Forget, RecallRequest
from services.stack import Running
from shared.messaging import streams
from shared.working_memory.buckets import bucket_names, key
from shared.working_memory.forgotten import bucket_name as marks_bucket
from shared.working_memory.forgotten import mark_key
from tests.support.attack import Tenants, VictimMemory
from tests.support.polling import eventually
from tests.support.scrape import metric
from tests.support.secured import Deployment, raw
from tests.support.tenant_state import settled_state
from tests.support.turns import make_turn


def _engram_places(victim: str) -> list[str]:
    """Subjects of engram's own state and of the victim's that a reply could point at."""
    buffers, turns, open_index = bucket_names("mem")
    leases, runs = streams.consolidation_buckets("mem")
    conversation = key(victim, "v-open")
    return [subjects.kv_key(open_index, conversation), subjects.kv_key(buffers, conversation),
            subjects.kv_key(turns, f"{conversation}.1"),
            subjects.kv_key(marks_bucket("mem"), mark_key(victim, "u", "u1")),
            subjects.kv_key(leases, victim), subjects.kv_key(runs, victim),
            f"$JS.API.STREAM.PURGE.{streams.turns_stream('mem', victim)}",
            f"$JS.API.STREAM.DELETE.{streams.turns_stream('mem', victim)}",
            subjects.turns("mem", victim), subjects.flush("mem", victim), subjects.rebuild("mem"),
            "_INBOX.someone-elses"]


async def test_reply_subjects_a_product_names_never_reach_engrams_state(
        deployment: Deployment, stack: Running, tenants: Tenants, victim_memory: VictimMemory) -> None:
    """The attacker publishes turns and flushes, and sends recall, entries, forget and consolidate requests, each with
    a reply subject naming engram's buckets (the victim's open-index mark, buffer, turn text, forget mark, lease,
    schedule record), the JetStream API on the victim's stream, the victim's subjects, engram's operator subject or
    another inbox. The victim's stream, buckets and entries are the same before and after; its open window is still
    whole (flushed afterwards, every turn is stored); and the attacker's own requests are still answered."""
    victim, attacker = tenants.victim, tenants.attacker
    nc = stack.ingestor_deps[0].nc
    before = await settled_state(nc, stack.store, victim)
    hostile = await raw(deployment, deployment.security(attacker), "attacker")
    try:
        requests = {
            "turns": make_turn("hello from the attacker", conversation_id="a1").model_dump_json().encode(),
            "flush": b'{"conversation_id": "a1"}',
            "recall": RecallRequest(query="parrot").model_dump_json().encode(),
            "entries": EntriesRequest(op="list").model_dump_json().encode(),
            "forget": Forget(user_id="someone").model_dump_json().encode(),
            "consolidate": b"{}",
        }
        for place in _engram_places(victim):
            for kind, body in requests.items():
                await hostile.nc.publish(f"mem.{attacker}.{kind}", body, reply=place,
                                         headers={"Nats-Msg-Id": f"{victim}:v-open:v-open-0"})
        await hostile.nc.flush()
        # The attacker's own request is still answered on its inbox (by now, refused: it is over its request rate).
        answer = json.loads((await hostile.nc.request(f"mem.{attacker}.entries", requests["entries"],
                                                      timeout=10)).data)
        assert answer["schema_version"] == 1 and answer["error"]["code"] == "unavailable"
        assert "over its requests rate" in answer["error"]["message"]
    finally:
        await hostile.nc.close()
    after = await settled_state(nc, stack.store, victim)
    assert after == before
    async with await deployment.client(victim) as client:
        await client.flush("v-open")
        await wait_until_stored(client, victim_memory.open_window, timeout_s=60)
        found = await client.recall("What is the parrot called?")
        assert any("Kiwi" in e.text for e in found.entries)


@pytest.mark.parametrize("kind", ["recall", "entries", "forget", "consolidate"])
async def test_engram_answers_no_reply_subject_but_an_inbox_even_from_its_own_account(
        deployment: Deployment, stack: Running, tenants: Tenants, victim_memory: VictimMemory, kind: str) -> None:
    """A request from engram's own account (where no account boundary maps the reply) naming the victim's open-index
    mark as its reply is not answered: the key stays absent, the refusal is counted in
    engram_replies_refused_total, and the same request with an inbox is answered."""
    _, _, open_index = bucket_names("mem")
    target = subjects.kv_key(open_index, key(tenants.victim, f"planted-{kind}"))
    service = "retriever" if kind in ("recall", "entries") else "consolidator"
    refused_before = await metric(stack.http_port, "engram_replies_refused_total", service=service)
    insider = await raw(deployment, deployment.engram_security(), "insider")
    body = {"recall": RecallRequest(query="parrot").model_dump_json(), "entries": '{"op": "list"}',
            "forget": Forget(user_id="nobody").model_dump_json(), "consolidate": "{}"}[kind].encode()
    try:
        await insider.nc.publish(f"mem.{tenants.bystander}.{kind}", body, reply=target)
        await eventually(lambda: metric(stack.http_port, "engram_replies_refused_total", service=service),
                         lambda n: n > refused_before, timeout_s=20)
        answer = await insider.nc.request(f"mem.{tenants.bystander}.{kind}", body, timeout=30)
        assert answer.data
        js = insider.nc.jetstream()
        with pytest.raises(Exception, match=r"not found|no message"):
            await js.get_last_msg(streams.kv_stream(open_index), target)
    finally:
        await insider.nc.close()


async def test_a_product_that_names_another_tenants_subject_as_its_reply_gets_nothing_there(
        deployment: Deployment, stack: Running, tenants: Tenants) -> None:
    """The attacker's recall naming the victim's recall subject as its reply: nothing reaches the victim's subject
    (a tap in engram's account sees no message on it), and nothing of the victim's reaches the attacker."""
    tap = await raw(deployment, deployment.engram_security(), "tap")
    seen: list[str] = []

    async def record(msg: object) -> None:
        seen.append(str(getattr(msg, "subject", "")))

    await tap.nc.subscribe(f"mem.{tenants.victim}.>", cb=record)
    await tap.subscribed()
    hostile = await raw(deployment, deployment.security(tenants.attacker), "attacker")
    try:
        await hostile.nc.publish(f"mem.{tenants.attacker}.recall", RecallRequest(query="x").model_dump_json()
                                 .encode(), reply=f"mem.{tenants.victim}.recall")
        answer = await hostile.nc.request(f"mem.{tenants.attacker}.recall",
                                          RecallRequest(query="x").model_dump_json().encode(), timeout=10)
        assert answer.data  # answered after the first, so the first was handled
        await tap.nc.flush()
        assert seen == []
        with pytest.raises(NatsTimeout):
            await hostile.nc.request(f"mem.{tenants.victim}.recall", b"{}", timeout=1)
        await eventually(lambda: hostile.errors, lambda errors: any("permissions violation" in e.lower()
                                                                    for e in errors), timeout_s=5)
    finally:
        await hostile.nc.close()
        await tap.nc.close()
