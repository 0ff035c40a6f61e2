"""NATS goes away and comes back: clients and services reconnect by themselves, and no turn is lost or doubled."""
import asyncio
from collections import Counter
from collections.abc import Awaitable
from pathlib import Path

import pytest

from engram_client import MemoryClient, connection, subjects, wait_until_stored
from engram_client.contract import Turn
from engram_client.errors import EngramError, Unavailable
from services.stack import running
from shared.messaging import nats_server, streams
from shared.messaging.nats_server import EmbeddedNats
from shared.settings import Settings
from tests.support.ids import unique
from tests.support.memory import stored_turn_ids
from tests.support.polling import eventually
from tests.support.turns import conversation, make_turn

OUTAGE_S = 8.0  # longer than the client used to keep trying (10 attempts half a second apart)


def restart(server: EmbeddedNats) -> EmbeddedNats:
    """Start nats-server again on the same port with the same JetStream store."""
    return nats_server.start(server.store_dir, port=server.port)


async def publish_until_accepted(client: MemoryClient, turn: Turn) -> None:
    """What a product does while NATS is away: try again until the publish is acknowledged."""
    await eventually(lambda: _succeeds(client.publish_turn(turn)), timeout_s=60, interval_s=0.2)


async def _succeeds(call: Awaitable[object]) -> bool:
    """Whether the call went through (an EngramError: NATS is not back yet)."""
    try:
        await call
    except EngramError:
        return False
    return True


async def test_the_client_outlives_a_nats_outage(tmp_path: Path) -> None:
    """A client whose NATS server is down for 8 s publishes again once the server is back on the same port, without
    reconnecting by hand."""
    server = nats_server.start(tmp_path / "nats")
    tenant = unique("t")
    await with_turns_stream(server, tenant)
    client = await MemoryClient.connect(server.url, tenant, timeout_s=2)
    try:
        await client.publish_turn(make_turn("before the outage", conversation_id="o1"))
        server.kill()
        await asyncio.sleep(OUTAGE_S)  # the outage itself is what is being tested
        server = restart(server)
        await publish_until_accepted(client, make_turn("after the outage", conversation_id="o1"))
        # Both turns are in the stream, each once, sent by the same client object that lived through the outage.
        assert await stored_turns(server, client.tenant) == 2
    finally:
        await client.close()
        server.stop()


async def with_turns_stream(server: EmbeddedNats, tenant: str) -> None:
    """Make the tenant's turns stream, as an ingestor does on the tenant's first message."""
    setup = await connection.connect(server.url, "setup")
    try:
        await streams.ensure_tenant(setup.jetstream(), "mem", tenant, streams.TurnsLimits())
    finally:
        await setup.close()


async def stored_turns(server: EmbeddedNats, tenant: str) -> int:
    """How many messages the turns stream holds for the tenant."""
    nc = await connection.connect(server.url, "probe")
    try:
        info = await nc.jetstream().stream_info(streams.turns_stream("mem", tenant),
                                                subjects_filter=subjects.turns("mem", tenant))
    finally:
        await nc.close()
    return sum((info.state.subjects or {}).values())


async def test_a_publish_nats_does_not_acknowledge_fails_with_unavailable(tmp_path: Path) -> None:
    """A publish no stream takes, and one sent while the server is down, both fail at the client with
    `unavailable` (retryable); sent again with the same turn id once NATS is back, the turn is in the stream once
    (the first attempt, buffered by the client, may also have arrived: JetStream drops the duplicate)."""
    server = nats_server.start(tmp_path / "nats")
    tenant = unique("t")
    client = await MemoryClient.connect(server.url, tenant, timeout_s=1)
    try:
        with pytest.raises(Unavailable):  # no stream yet and no ingestor to make it: no one acknowledges
            await client.publish_turn(make_turn("before any stream", conversation_id="u1"))
        await with_turns_stream(server, tenant)
        await client.publish_turn(make_turn("acknowledged", conversation_id="u1"))
        server.kill()
        lost = make_turn("sent while NATS is down", conversation_id="u1")
        with pytest.raises(Unavailable) as refused:
            await client.publish_turn(lost)
        assert refused.value.retryable and "send it again" in str(refused.value)
        server = restart(server)
        await publish_until_accepted(client, lost)
    finally:
        await client.close()
    try:
        assert await stored_turns(server, tenant) == 2
    finally:
        server.stop()


async def test_the_clients_buffer_is_bounded_and_a_refused_publish_is_not_half_sent(tmp_path: Path) -> None:
    """While NATS is away the client buffers at most `pending_bytes`; a publish that does not fit fails at once with
    `unavailable` and nothing of it reaches the server when the client reconnects."""
    server = nats_server.start(tmp_path / "nats")
    tenant = unique("t")
    await with_turns_stream(server, tenant)
    client = await MemoryClient.connect(server.url, tenant, timeout_s=1, pending_bytes=4096)
    try:
        await client.publish_turn(make_turn("acknowledged", conversation_id="b1"))
        server.kill()
        # Once the client knows the server is gone, what it sends is buffered (or refused) rather than written.
        await eventually(lambda: client._nc.is_reconnecting, timeout_s=10, interval_s=0.05)
        with pytest.raises(Unavailable, match="OutboundBufferLimitError"):
            await client.publish_turn(make_turn("x" * 5000, conversation_id="b1"))
        server = restart(server)
        await publish_until_accepted(client, make_turn("after the outage", conversation_id="b1"))
    finally:
        await client.close()
    try:
        assert await stored_turns(server, tenant) == 2  # the refused one never arrived
    finally:
        server.stop()


async def test_a_client_closes_without_error_while_nats_is_away(tmp_path: Path) -> None:
    """Closing the client (or leaving its `async with`) while the server is down neither raises nor hangs: what it
    had buffered was never acknowledged and is dropped."""
    server = nats_server.start(tmp_path / "nats")
    client = await MemoryClient.connect(server.url, unique("t"), timeout_s=1)
    server.kill()
    await eventually(lambda: client._nc.is_reconnecting, timeout_s=10, interval_s=0.05)
    with pytest.raises(Unavailable):
        await client.publish_turn(make_turn("buffered, never acknowledged", conversation_id="z1"))
    await client.close()
    assert client._nc.is_closed


async def test_a_nats_restart_during_ingest_loses_nothing_and_doubles_nothing(tmp_path: Path) -> None:
    """A NATS restart halfway through publishing, with windows open and in flight, ends with every turn stored
    exactly once."""
    tenant = unique("t")
    server = nats_server.start(tmp_path / "nats")
    settings = Settings(data_dir=tmp_path / "data", http_port=0, sweep_interval_s=0.2, seal_grace_s=1.0,
                        idle_timeout_s=2.0, ack_wait_s=5.0)
    turns = [t for c in range(6) for t in conversation(
        [("Ana" if i % 2 else "Bo", f"Conversation {c}, line {i}: something worth keeping number {i}.")
         for i in range(10)], conversation_id=f"r-{c}")]
    order = sorted(turns, key=lambda t: (int(t.turn_id.rsplit("-", 1)[1]), t.conversation_id))
    try:
        async with running(settings, nats_url=server.url) as state:
            async with await MemoryClient.connect(state.nats_url, tenant, timeout_s=2) as client:
                for i, turn in enumerate(order):
                    if i == len(order) // 2:  # mid-stream: windows open, some written, some in flight
                        server.kill()
                        server = restart(server)
                    await publish_until_accepted(client, turn)
                for c in range(6):
                    await eventually(lambda c=c: _succeeds(client.flush(f"r-{c}")), timeout_s=60, interval_s=0.2)
                await wait_until_stored(client, turns, timeout_s=120)
            ids = await stored_turn_ids(state.store, tenant)
    finally:
        server.stop()
    counts = Counter(ids)
    assert set(counts) == {t.turn_id for t in turns}, "a turn was lost"
    assert max(counts.values()) == 1, f"stored twice: {[k for k, v in counts.items() if v > 1]}"
