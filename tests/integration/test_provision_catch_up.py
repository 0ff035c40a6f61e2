"""Turns that wait in the provisioner while their tenant's stream is made (real nats-server, JetStream): the stream
did not see them, so they are stored through it once it is made, whoever made it, and their publishers are answered;
a turn whose id the stream holds is not stored twice, and a flood waits only CATCH_UP messages long."""
import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client
from nats.js.errors import NotFoundError

from engram_client import subjects
from shared.messaging import nats_server, provision, streams
from shared.messaging.provision import Provisioner
from tests.support.ids import unique

MAKING_S = 0.5  # how long making a stream takes here: the time a publisher's retry arrives in


@pytest.fixture
async def nc(tmp_path: Path) -> AsyncIterator[Client]:
    server = nats_server.start(tmp_path / "nats")
    client = await nats.connect(server.url)
    try:
        yield client
    finally:
        await client.close()
        server.stop()


async def started(nc: Client, prefix: str, making_s: dict[str, float] | None = None) -> Provisioner:
    """A provisioner whose streams take MAKING_S to make (or as `making_s` says for a tenant)."""
    js = nc.jetstream()

    async def ensure(tenant: str) -> bool:
        await asyncio.sleep((making_s or {}).get(tenant, MAKING_S))
        return await streams.ensure_tenant(js, prefix, tenant, streams.TurnsLimits())

    provisioner = Provisioner(nc, prefix, ensure, lambda tenant: True)
    await provisioner.start(set())
    return provisioner


async def send(nc: Client, subject: str, body: str, msg_id: str | None, timeout: float = 5.0) -> int | None:
    """Publish as a client does (a request, answered by the stream or the provisioner); the sequence, or None when
    nobody answered."""
    headers = {"Nats-Msg-Id": msg_id} if msg_id else None
    try:
        reply = await nc.request(subject, body.encode(), timeout=timeout, headers=headers)
    except nats.errors.TimeoutError:
        return None
    return int(json.loads(reply.data)["seq"])


async def stored(nc: Client, prefix: str, tenant: str) -> list[str]:
    """The bodies the tenant's stream holds, in order."""
    js = nc.jetstream()
    info = await js.stream_info(streams.turns_stream(prefix, tenant))
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            out.append((await js.get_msg(streams.turns_stream(prefix, tenant), seq)).data.decode())
        except NotFoundError:
            continue
    return out


async def test_turns_sent_while_the_stream_is_made_are_stored_once_and_answered(nc: Client) -> None:
    """A first turn starts the stream; its retry (same id), a second turn and a flush arrive while it is made. The
    first turn and the second are stored once each and every turn is answered with its sequence (the retry, whose id
    the stream holds, with the first's); the flush, on a subscription of its own, makes (finds) the stream itself and
    is stored once. A turn published once the stream exists is the stream's alone."""
    prefix, tenant = unique("p"), unique("t")
    provisioner = await started(nc, prefix)
    turns, flush = subjects.turns(prefix, tenant), subjects.flush(prefix, tenant)
    try:
        first = asyncio.create_task(send(nc, turns, "one", f"{tenant}:c:1"))
        await asyncio.sleep(MAKING_S / 5)  # the provisioner is making the stream now
        retry = asyncio.create_task(send(nc, turns, "one", f"{tenant}:c:1"))
        second = asyncio.create_task(send(nc, turns, "two", f"{tenant}:c:2"))
        flushed = asyncio.create_task(send(nc, flush, "flush", None))
        assert await first == 1
        answered = [await retry, await second, await flushed]
        assert answered[0] == 1 and sorted(answered[1:]) == [2, 3], answered
        assert await send(nc, turns, "three", f"{tenant}:c:3") == 4  # the stream's own answer
        await asyncio.sleep(0.2)
        assert sorted(await stored(nc, prefix, tenant)) == ["flush", "one", "three", "two"]
    finally:
        await provisioner.stop()


async def test_a_flood_while_the_stream_is_made_is_caught_up_only_catch_up_long(
        nc: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Of turns queued while the stream is made, only the first CATCH_UP are stored through it (here 5 of 20): a
    product flooding its first moments makes the provisioner wait at most that long; the rest, as before, get no
    answer from it (their publishers send them again, and the stream takes them)."""
    monkeypatch.setattr(provision, "CATCH_UP", 5)
    prefix, tenant = unique("p"), unique("t")
    provisioner = await started(nc, prefix)
    turns = subjects.turns(prefix, tenant)
    try:
        first = asyncio.create_task(send(nc, turns, "t0", f"{tenant}:c:0"))
        await asyncio.sleep(MAKING_S / 5)
        flood = [asyncio.create_task(send(nc, turns, f"t{i}", f"{tenant}:c:{i}", timeout=4.0))
                 for i in range(1, 21)]
        assert await first == 1
        answered = [seq for seq in await asyncio.gather(*flood) if seq is not None]
        assert len(answered) == 5
        assert len(await stored(nc, prefix, tenant)) == 6
    finally:
        await provisioner.stop()


async def test_a_turn_waiting_behind_another_tenant_is_stored_when_its_stream_is_made_elsewhere(nc: Client) -> None:
    """While the turns subscription makes tenant A's stream, a turn of B and one of C wait behind it. B's stream is
    made meanwhile by B's flush, on the other subscription; C's by another replica, which announces it. Both turns
    are stored through their streams and answered, though neither tenant was made where they waited."""
    prefix, a, b, c = unique("p"), unique("a"), unique("b"), unique("c")
    provisioner = await started(nc, prefix, {a: 6 * MAKING_S, b: MAKING_S / 5})  # A's takes 3 s: room for B's, C's
    try:
        first = asyncio.create_task(send(nc, subjects.turns(prefix, a), "a1", f"{a}:c:1", timeout=20.0))
        await asyncio.sleep(MAKING_S / 5)  # the turns subscription is making A's stream
        waiting_b = asyncio.create_task(send(nc, subjects.turns(prefix, b), "b1", f"{b}:c:1", timeout=20.0))
        waiting_c = asyncio.create_task(send(nc, subjects.turns(prefix, c), "c1", f"{c}:c:1", timeout=20.0))
        await asyncio.sleep(MAKING_S / 5)
        assert await send(nc, subjects.flush(prefix, b), "b-flush", None) == 1  # B's stream, made by the flush
        await streams.ensure_tenant(nc.jetstream(), prefix, c, streams.TurnsLimits())  # another replica makes C's
        await nc.publish(subjects.tenant_streams(prefix), c.encode())
        assert await first == 1
        assert (await waiting_b, await waiting_c) == (2, 1)
        assert await stored(nc, prefix, b) == ["b-flush", "b1"] and await stored(nc, prefix, c) == ["c1"]
    finally:
        await provisioner.stop()
