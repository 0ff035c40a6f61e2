"""The pull consumer every ingestor runs, against a real nats-server: retries, dead letters, and a loop that no
message can stop."""
import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from engram_client import connection
from engram_client.errors import InvalidRequest, Unavailable
from shared.messaging import deadletter, nats_server, streams
from shared.messaging.consumer import PullConsumer
from shared.working_memory import WorkingMemory
from tests.support.dead_letters import dead_letters
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.turns import make_turn


@dataclass
class Broker:
    """A fresh nats-server with engram's streams, and a connection to it."""

    url: str
    nc: Client
    js: JetStreamContext
    handled: list[str] = field(default_factory=list)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    server = nats_server.start(tmp_path / "nats")
    nc = await connection.connect(server.url, "test")
    js = nc.jetstream()
    await streams.ensure(js, "mem")
    yield Broker(server.url, nc, js)
    await nc.close()
    server.stop()


async def consumer(broker: Broker, tenant: str, handle: deadletter.Handler, *, max_deliver: int = 5,
                   ack_wait_s: float = 30.0) -> PullConsumer:
    """A pull loop over the tenant's turns stream (made here)."""
    await streams.ensure_tenant(broker.js, "mem", tenant, streams.TurnsLimits())
    stream = await streams.holding(broker.js, "mem", tenant)
    assert stream is not None
    settler = deadletter.Settler("ingestor", "mem", max_deliver, broker.js)
    return PullConsumer(broker.js, stream.name, streams.ingestor_consumer(stream, ack_wait_s, 100), settler, handle,
                        batch=8)


def turn_body(text: str) -> bytes:
    return make_turn(text, conversation_id="c1").model_dump_json().encode()


async def test_a_retryable_failure_is_nakd_then_dead_lettered_after_max_deliver(broker: Broker) -> None:
    """A message whose handler keeps raising a retryable error is redelivered max_deliver times, then dead-lettered
    with its code, delivery count and reason."""
    tenant = unique("t")
    deliveries: list[int] = []

    async def handle(tenant: str, kind: str, body: bytes, seq: int) -> None:
        deliveries.append(seq)
        raise Unavailable("the store does not answer")

    pulling = await consumer(broker, tenant, handle, max_deliver=3)
    await pulling.start()
    try:
        await broker.js.publish(f"mem.{tenant}.turns", turn_body("I moved to Lisbon."))
        [letter] = await dead_letters(broker.url, tenant, timeout_s=30)
    finally:
        await pulling.stop()
    headers = letter.headers or {}
    assert len(deliveries) == 3 and len(set(deliveries)) == 1  # the same message, delivered three times
    assert headers[deadletter.HEADER_CODE] == "unavailable" and headers[deadletter.HEADER_DELIVERIES] == "3"
    assert "the store does not answer" in headers[deadletter.HEADER_REASON]


async def test_a_message_that_cannot_be_settled_does_not_stop_the_loop(broker: Broker) -> None:
    """The dead-letter stream is gone, so dead-lettering fails: the bad message waits, the good ones go on."""
    tenant = unique("t")

    async def handle(tenant: str, kind: str, body: bytes, seq: int) -> None:
        text = json.loads(body)["text"]
        if text.startswith("bad"):
            raise InvalidRequest(f"refusing {text!r}")
        broker.handled.append(text)

    await broker.js.delete_stream(streams.dlq_stream("mem"))
    pulling = await consumer(broker, tenant, handle, ack_wait_s=1.0)
    task = await pulling.start()
    try:
        await broker.js.publish(f"mem.{tenant}.turns", turn_body("bad: cannot be dead-lettered yet"))
        await broker.js.publish(f"mem.{tenant}.turns", turn_body("good: handled meanwhile"))
        await eventually(lambda: _value(broker.handled), lambda handled: "good: handled meanwhile" in handled)
        assert not task.done()
        await streams.ensure(broker.js, "mem")  # the dead-letter stream is back: the redelivery is dead-lettered
        [letter] = await dead_letters(broker.url, tenant, timeout_s=30)
        assert json.loads(letter.data)["text"] == "bad: cannot be dead-lettered yet"
        assert int((letter.headers or {})[deadletter.HEADER_DELIVERIES]) >= 2
        assert not task.done()
    finally:
        await pulling.stop()


async def _value(value: list[str]) -> list[str]:
    return value


async def test_a_message_that_hangs_every_replica_is_dead_lettered_after_max_deliver_cut_short_attempts(
        broker: Broker) -> None:
    """A message whose handling never returns: each replica handling it is stopped from outside (as a liveness probe
    kills a frozen process) and another replica, with a connection of its own, gets it again after ack_wait. The
    attempts cut short are counted in working memory before each one, so past max_deliver the next replica
    dead-letters it without handling it, with the reason, and the message after it is handled."""
    tenant = unique("t")
    wm = await WorkingMemory.open(broker.js, "mem")
    handled: list[str] = []
    began = asyncio.Event()

    async def handle(tenant: str, kind: str, body: bytes, seq: int) -> None:
        text = json.loads(body)["text"]
        if text.startswith("poison"):
            began.set()
            await asyncio.Event().wait()  # never returns: a freeze
        handled.append(text)

    await streams.ensure_tenant(broker.js, "mem", tenant, streams.TurnsLimits())
    await broker.js.publish(f"mem.{tenant}.turns", turn_body("poison: freezes whoever handles it"))
    await broker.js.publish(f"mem.{tenant}.turns", turn_body("fine: handled once the poison is set aside"))
    stream = await streams.holding(broker.js, "mem", tenant)
    assert stream is not None
    for replica in range(4):  # 1 first delivery, then max_deliver (2) counted attempts cut short, then set aside
        nc = await connection.connect(broker.url, f"replica-{replica}")
        try:
            settler = deadletter.Settler("ingestor", "mem", 2, nc.jetstream(), attempts=wm.attempts)
            pulling = PullConsumer(nc.jetstream(), stream.name, streams.ingestor_consumer(stream, 1.0, 100),
                                   settler, handle, batch=1)
            await pulling.start()
            if replica < 3:
                await asyncio.wait_for(began.wait(), timeout=30)
                began.clear()
                await pulling.stop(timeout_s=0.1)  # the replica is killed while it handles the poison
            else:
                [letter] = await dead_letters(broker.url, tenant, timeout_s=30)
                await eventually(lambda: _value(handled), lambda h: "fine: handled once the poison is set aside"
                                 in h, timeout_s=30)
                await pulling.stop()
        finally:
            await nc.close()
    headers = letter.headers or {}
    assert json.loads(letter.data)["text"].startswith("poison")
    assert headers[deadletter.HEADER_CODE] == "internal" and "cut short" in headers[deadletter.HEADER_REASON]
    assert handled == ["fine: handled once the poison is set aside"]
