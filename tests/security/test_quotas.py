"""Quotas: each tenant's limits hold for that tenant alone, each refusal is a clear error to it, and the victim can
do everything it could before. NATS enforces the account's payload, connections and subscriptions and the turns
stream's bytes; engram enforces the request rates (and says so in engram_quota_refusals_total)."""
import contextlib
import json

import pytest
from nats.errors import Error as NatsError
from nats.js.errors import APIError

from engram_client import wait_until_stored
from engram_client.contract import RecallRequest, Turn
from engram_client.contract.base import MAX_LIST_ITEMS, MAX_TEXT_CHARS
from engram_client.errors import Unavailable
from services.stack import Running
from tests.support.attack import ATTACKER_QUOTA, Tenants, VictimMemory
from tests.support.polling import eventually
from tests.support.scrape import metric
from tests.support.secured import Deployment, raw
from tests.support.tenant_state import settled_state
from tests.support.turns import make_turn


def _largest_legal_turn() -> bytes:
    """A turn as large as the contract allows, every character escaped in JSON (6 bytes each)."""
    turn = Turn(conversation_id="c" * 128, turn_id="t" * 128, speaker="s" * 128, role="user",
                text="a" + "\x01" * (MAX_TEXT_CHARS - 1), ts="2024-05-08T10:00:00+00:00", user_id="u" * 128,
                agent_id="g" * 128, metadata={f"{i:02d}" + "\x01" * 62: "\x01" * 1024 for i in range(MAX_LIST_ITEMS)})
    return turn.model_dump_json().encode()


def test_the_largest_legal_turn_fits_the_default_payload_limit(deployment: Deployment) -> None:
    """The account's max_payload refuses nothing legal: the largest turn the contract allows fits in it."""
    assert len(_largest_legal_turn()) < deployment.default.max_payload_bytes


async def test_an_oversized_message_is_refused_to_its_sender_alone(
        deployment: Deployment, stack: Running, tenants: Tenants, victim_memory: VictimMemory) -> None:
    """A payload past the account's limit: the server refuses it (`maximum payload exceeded`) and closes the
    attacker's connection; nothing reaches engram, and the victim's state is unchanged."""
    before = await settled_state(stack.ingestor_deps[0].nc, stack.store, tenants.victim)
    hostile = await raw(deployment, deployment.security(tenants.attacker), "attacker")
    try:
        big = b'{"text": "' + b"x" * (deployment.default.max_payload_bytes + 1024) + b'"}'
        with contextlib.suppress(NatsError, OSError, TimeoutError):  # the connection is gone by the flush
            await hostile.nc.publish(f"mem.{tenants.attacker}.turns", big)
            await hostile.nc.flush(timeout=5)
        # The server says why before it closes the connection (nats-py over TLS reports the close itself).
        await eventually(deployment.log, lambda log: "maximum payload exceeded" in log.lower(), timeout_s=10)
        await eventually(lambda: hostile.nc.is_connected, lambda connected: not connected, timeout_s=10)  # then closed
    finally:
        await hostile.nc.close()
    assert await settled_state(stack.ingestor_deps[0].nc, stack.store, tenants.victim) == before


async def test_filling_its_storage_quota_refuses_the_attackers_turns_and_no_one_elses(
        deployment: Deployment, stack: Running, tenants: Tenants, victim_memory: VictimMemory) -> None:
    """The attacker publishes large legal turns until its turns stream is full (1 MiB): the next publish is refused
    with `maximum bytes exceeded` (the SDK raises it as `unavailable`), while the victim publishes a turn that is
    stored."""
    hostile = await raw(deployment, deployment.security(tenants.attacker), "attacker")
    js = hostile.nc.jetstream()
    refused: APIError | None = None
    try:
        for i in range(200):  # 1 MiB / ~15 KB turns: full after about 70
            turn = make_turn("junk " * 3000, conversation_id=f"flood-{i}")
            try:
                await js.publish(f"mem.{tenants.attacker}.turns", turn.model_dump_json().encode(), timeout=10)
            except APIError as exc:
                refused = exc
                break
    finally:
        await hostile.nc.close()
    assert refused is not None and "maximum bytes exceeded" in str(refused.description)
    async with await deployment.client(tenants.attacker) as sdk:  # the SDK says so as the wire's error
        with pytest.raises(Unavailable, match="maximum bytes exceeded"):
            await sdk.publish_turn(make_turn("junk " * 3000, conversation_id="flood-sdk"))
    async with await deployment.client(tenants.victim) as victim:
        turn = make_turn("I planted tomatoes on the balcony.", conversation_id="v-quota")
        await victim.publish_turn(turn)
        await victim.flush("v-quota")
        await wait_until_stored(victim, [turn], timeout_s=60)
    # The refusal shows: the attacker's stream counts among the tenants near their storage quota.
    await eventually(lambda: metric(stack.http_port, "engram_tenants_near_quota", quota="turns_storage"),
                     lambda n: n >= 1, timeout_s=30)


async def test_connections_past_the_quota_are_refused_to_that_tenant_alone(
        deployment: Deployment, tenants: Tenants) -> None:
    """The attacker's connections past its quota are refused (`maximum account active connections exceeded`); the
    victim connects all the same."""
    opened = []
    try:
        for _ in range(int(str(ATTACKER_QUOTA["max_connections"]))):
            opened.append(await raw(deployment, deployment.security(tenants.attacker), "attacker"))
        extra = None
        with pytest.raises(Exception):  # noqa: B017 - nats-py raises a bare Error or gives up connecting
            extra = await raw(deployment, deployment.security(tenants.attacker), "one-too-many")
        assert extra is None
        assert "maximum account active connections exceeded" in deployment.log()
        victim = await raw(deployment, deployment.security(tenants.victim), "victim")
        await victim.nc.close()
    finally:
        for conn in opened:
            await conn.nc.close()


async def test_subscriptions_past_the_quota_are_refused(deployment: Deployment, tenants: Tenants) -> None:
    """Subscriptions past the attacker's quota are refused (`maximum subscriptions exceeded`, and the server closes
    that connection); the victim subscribes all the same."""
    hostile = await raw(deployment, deployment.security(tenants.attacker), "attacker")
    try:
        with contextlib.suppress(NatsError):  # the server closes the connection at the one too many
            for i in range(int(str(ATTACKER_QUOTA["max_subscriptions"])) + 5):
                await hostile.nc.subscribe(f"_INBOX.many.{i}")
            await hostile.subscribed()
        await eventually(deployment.log, lambda log: "maximum subscriptions exceeded" in log.lower(), timeout_s=10)
    finally:
        await hostile.nc.close()
    victim = await raw(deployment, deployment.security(tenants.victim), "victim")
    try:
        for i in range(50):
            await victim.nc.subscribe(f"_INBOX.mine.{i}")
        await victim.subscribed()
        assert victim.errors == []
    finally:
        await victim.nc.close()


async def test_requests_past_the_rate_are_refused_with_a_retry_hint_and_the_victim_is_answered(
        deployment: Deployment, stack: Running, tenants: Tenants, victim_memory: VictimMemory) -> None:
    """The attacker's recalls past its rate (2 a second, bursts of 4) are answered `unavailable` with a retry hint
    and counted; the victim's recalls in the same moment are answered."""
    refused_before = await metric(stack.http_port, "engram_quota_refusals_total", quota="recall")
    hostile = await raw(deployment, deployment.security(tenants.attacker), "attacker")
    body = RecallRequest(query="anything").model_dump_json().encode()
    try:
        answers = [await hostile.nc.request(f"mem.{tenants.attacker}.recall", body, timeout=10) for _ in range(10)]
    finally:
        await hostile.nc.close()
    refused = [a for a in answers if (json.loads(a.data).get("error") or {}).get("code") == "unavailable"]
    assert len(refused) >= 5
    assert all(int((a.headers or {})["Engram-Retry-After-Ms"]) > 0 for a in refused)
    assert "over its recall rate" in json.loads(refused[0].data)["error"]["message"]
    assert await metric(stack.http_port, "engram_quota_refusals_total", quota="recall") >= refused_before + 5
    async with await deployment.client(tenants.victim) as victim:
        for _ in range(10):
            found = await victim.recall("What is the parrot called?")
            assert found.error is None


async def test_the_sdk_waits_out_its_rate_instead_of_failing(deployment: Deployment, stack: Running,
                                                              tenants: Tenants) -> None:
    """A well-behaved client over its rate is slowed down, not failed: the SDK honours the retry hint."""
    async with await deployment.client(tenants.attacker, timeout_s=30) as client:
        for _ in range(8):
            try:
                await client.recall("anything")
            except Unavailable as exc:  # only past the client's own timeout
                pytest.fail(f"the SDK gave up instead of waiting: {exc}")
