"""engram on a three-node JetStream cluster with every stream and bucket at 3 replicas: the server leading the turns
stream is SIGKILLed while turns are published and recalls asked; every turn ends in exactly one episode."""
import asyncio
import json
import time
from collections import Counter
from pathlib import Path

import nats

from engram_client import MemoryClient, wait_until_stored
from engram_client.contract import Turn
from engram_client.errors import EngramError, Timeout, Unavailable
from services.stack import running
from shared.messaging import streams
from tests.support.cluster import start_cluster
from tests.support.ids import unique
from tests.support.memory import stored_turn_ids
from tests.support.polling import eventually
from tests.support.stacks import fast_settings
from tests.support.turns import conversation

CONVERSATIONS, TURNS_EACH, KILL_AFTER = 3, 24, 24
GIVE_UP_S = 120.0  # a publish still failing this long after the kill fails the test (the cluster never recovered)


async def publish_until_acked(client: MemoryClient, turn: Turn | str, failures: Counter[str]) -> float:
    """Publish a turn (or flush a conversation) as a product should: again after `unavailable` or `timeout`
    (same turn id, so JetStream keeps one); returns when it was acknowledged."""
    give_up = time.monotonic() + GIVE_UP_S
    while True:
        try:
            if isinstance(turn, str):
                await client.flush(turn)
            else:
                await client.publish_turn(turn)
            return time.monotonic()
        except (Unavailable, Timeout) as exc:
            failures[exc.code] += 1
            if time.monotonic() > give_up:
                raise
            await asyncio.sleep(0.1)


async def lead_turns_stream(nc: nats.NATS, stream: str, server_name: str) -> bool:
    """Whether `server_name` leads the turns stream; if not, ask the leader to step down in its favour (once)."""
    if (await nc.jetstream().stream_info(stream)).cluster.leader == server_name:  # type: ignore[union-attr]
        return True
    await nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}",
                     json.dumps({"placement": {"preferred": server_name}}).encode(), timeout=5)
    return False


async def test_killing_the_turns_stream_leader_loses_no_turn_and_recall_keeps_answering(tmp_path: Path) -> None:
    """With ENGRAM_NATS_REPLICAS=3 every stream and key-value bucket engram creates has 3 replicas; SIGKILLing the
    server that leads the tenant's turns stream in the middle of publishing leaves every published turn in exactly
    one stored episode (none lost, none doubled), and recall answers throughout (its errors during the failover are
    counted and printed with how long publishing and recall were interrupted)."""
    servers = await start_cluster(tmp_path / "nats")
    by_name = {f"n{i}": server for i, server in enumerate(servers)}
    settings = fast_settings(tmp_path).model_copy(update={"nats_replicas": 3, "ack_wait_s": 5.0})
    tenant = unique("cluster")
    turns = [t for c in range(CONVERSATIONS) for t in conversation(
        [("Ana" if i % 2 else "Bo", f"Conversation {c}, turn {i}: a detail worth keeping, number {i}.")
         for i in range(TURNS_EACH)], conversation_id=f"conv-{c}")]
    order = sorted(turns, key=lambda t: (int(t.turn_id.rsplit("-", 1)[1]), t.conversation_id))
    publish_failures: Counter[str] = Counter()
    recall_errors: list[tuple[float, str]] = []
    recalls_ok: list[tuple[float, float]] = []  # when each answered recall was sent, and when its answer came
    stop = asyncio.Event()
    nc = await nats.connect(servers[0].url)
    try:
        async with running(settings, nats_url=servers[0].url) as state:
            js = nc.jetstream()
            async with await MemoryClient.connect(servers[0].url, tenant, timeout_s=10.0) as first:
                await first.flush("nothing-yet")  # the tenant's first message: engram makes its turns stream
            stream = streams.turns_stream("mem", tenant)
            replicas = {info.config.name: info.config.num_replicas for info in await js.streams_info()}
            assert set(replicas) >= {stream, "MEM_DLQ", "KV_MEM_WM_BUFFERS", "KV_MEM_WM_TURNS", "KV_MEM_WM_OPEN",
                                     "KV_MEM_CONSOLIDATION_LEASES", "KV_MEM_CONSOLIDATION_RUNS"}, replicas
            assert set(replicas.values()) == {3}, replicas
            # Everything connects to n0; make n0 the turns stream's leader, so that the kill below also cuts every
            # engram and client connection (they come back through the cluster's other servers): the hardest case.
            await eventually(lambda: lead_turns_stream(nc, stream, "n0"), timeout_s=60, interval_s=0.5)
            async with await MemoryClient.connect(servers[0].url, tenant, timeout_s=2.0) as client, \
                    await MemoryClient.connect(servers[0].url, tenant, timeout_s=2.0) as asker:

                async def ask() -> None:
                    while not stop.is_set():
                        sent = time.monotonic()
                        try:
                            await asker.recall("a detail worth keeping", conversation_id="conv-0",
                                               include_working_memory=True)
                            recalls_ok.append((sent, time.monotonic()))
                        except EngramError as exc:
                            recall_errors.append((time.monotonic(), exc.code))
                        await asyncio.sleep(0.1)

                asking = asyncio.create_task(ask())
                killed_at = first_ack_after_kill = 0.0
                leader = ""
                for i, turn in enumerate(order):
                    acked = await publish_until_acked(client, turn, publish_failures)
                    if killed_at and not first_ack_after_kill:
                        first_ack_after_kill = acked
                    if i + 1 == KILL_AFTER:
                        leader = (await js.stream_info(stream)).cluster.leader  # type: ignore[union-attr]
                        await nc.close()  # our own probe connection may be to the server about to die
                        by_name[leader].kill()
                        killed_at = time.monotonic()
                        survivor = next(s for name, s in by_name.items() if name != leader)
                        nc = await nats.connect(survivor.url)
                        js = nc.jetstream()
                for c in range(CONVERSATIONS):
                    await publish_until_acked(client, f"conv-{c}", publish_failures)
                new_leader = (await js.stream_info(stream)).cluster.leader  # type: ignore[union-attr]
                await wait_until_stored(client, turns, timeout_s=120)
                # Storing can finish before a recall sent after the kill is answered (on a loaded machine): keep
                # asking until one is, so the time recall took to come back is measured, not raced.
                await eventually(lambda: [a for sent, a in recalls_ok if sent > killed_at], timeout_s=60)
                stop.set()
                await asking
                after = await asker.recall("a detail worth keeping", conversation_id="conv-0")
            counts = Counter(await stored_turn_ids(state.store, tenant))
    finally:
        await nc.close()
        for server in servers:
            server.stop()
    lost = {t.turn_id for t in turns} - set(counts)
    doubled = sorted(k for k, v in counts.items() if v > 1)
    # The first answer to a recall asked after the kill (an answer read just after it may have come before it).
    recall_back_s = min(answered for sent, answered in recalls_ok if sent > killed_at) - killed_at
    print(f"\ncluster: {len(turns)} turns published ({sum(publish_failures.values())} publish attempts failed and "
          f"were sent again: {dict(publish_failures)}); turns-stream leader {leader} SIGKILLed after turn "
          f"{KILL_AFTER}, new leader {new_leader}; publishing acknowledged again {first_ack_after_kill - killed_at:.2f}"
          f" s after the kill; recall: {len(recalls_ok)} answered, {len(recall_errors)} errors "
          f"({dict(Counter(code for _, code in recall_errors))}), answered again {recall_back_s:.2f} s after the kill; "
          f"stored once {sum(1 for v in counts.values() if v == 1)}, lost {len(lost)}, doubled {len(doubled)}")
    assert new_leader != leader
    assert not lost, f"lost {len(lost)} turns: {sorted(lost)[:10]}"
    assert not doubled, f"stored twice: {doubled[:10]}"
    assert sum(counts.values()) == len(turns)
    assert after.entries, "recall finds the conversation after the failover"
