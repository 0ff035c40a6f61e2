"""Crash test: the ingestor process is SIGKILLed mid-window while turns are published; nothing is lost or doubled."""
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import nats
from nats.js.errors import NotFoundError

from engram_client import MemoryClient
from shared.messaging import streams
from shared.store import EdgeStore
from shared.working_memory import WorkingMemory
from tests.support.ids import unique
from tests.support.memory import stored_turn_ids
from tests.support.polling import eventually
from tests.support.spare import Spare
from tests.support.turns import conversation


def spare_ingestor(nats_url: str, data_dir: Path, log: Path) -> Spare:
    """An ingestor process that has done its imports and starts when told: the next one is made while the current
    one runs, so a restart after a SIGKILL takes its real start only (tests/support/spare.py)."""
    env = {**os.environ, "ENGRAM_NATS_URL": nats_url, "ENGRAM_DATA_DIR": str(data_dir), "ENGRAM_HTTP_PORT": "0",
           "ENGRAM_SEAL_GRACE_S": "1", "ENGRAM_ACK_WAIT_S": "2", "ENGRAM_SWEEP_INTERVAL_S": "0.2",
           "ENGRAM_IDLE_TIMEOUT_S": "600", "ENGRAM_FETCH_BATCH": "8"}
    return Spare(["ingestor"], env, log)


async def consumer_progress(js: nats.js.JetStreamContext, tenant: str) -> tuple[int, int, int]:
    """(acked floor, pending, waiting for ack) of the ingestor's durable consumer of the tenant's turns."""
    try:
        info = await js.consumer_info(streams.turns_stream("mem", tenant), "ingestor")
    except NotFoundError:
        return 0, -1, -1
    return info.ack_floor.stream_seq or 0, info.num_pending or 0, info.num_ack_pending or 0


async def test_sigkill_mid_window_loses_nothing_and_stores_nothing_twice(nats_url: str, tmp_path: Path) -> None:
    """An ingestor SIGKILLed three times mid-batch while turns keep coming, some published twice, ends with every
    turn stored in exactly one episode once it settles."""
    tenant = unique("crash")
    data_dir, log = tmp_path / "data", tmp_path / "ingestor.log"
    turns = [t for c in range(6) for t in conversation(
        [("Ana" if i % 2 else "Bo", f"Conversation {c}, turn {i}: a detail worth keeping number {i}.")
         for i in range(30)], conversation_id=f"conv-{c}")]
    # Interleave conversations, as several chats would.
    order = sorted(turns, key=lambda t: (int(t.turn_id.rsplit("-", 1)[1]), t.conversation_id))
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    # The tenant's stream made up front, as `engram tenants add` does: its consumer appears once an ingestor runs.
    await streams.ensure_tenant(js, "mem", tenant, streams.TurnsLimits())
    proc = spare_ingestor(nats_url, data_dir, log).run()
    spare: Spare | None = spare_ingestor(nats_url, data_dir, log)  # for the first restart
    kills = 0
    try:
        await eventually(lambda: consumer_progress(js, tenant), lambda p: p[1] >= 0, timeout_s=60)
        async with await MemoryClient.connect(nats_url, tenant) as client:
            for i, turn in enumerate(order):
                await client.publish_turn(turn)
                if i in (40, 95, 150):  # kill while windows are open and a batch is in flight, then come back
                    floor = (await consumer_progress(js, tenant))[0]
                    await eventually(lambda: consumer_progress(js, tenant), lambda p, f=floor: p[0] > f, timeout_s=60,
                                     interval_s=0.005)
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    kills += 1
                    # Publishing goes on while the ingestor is down: turns wait in the stream.
                    for extra in order[i + 1:i + 6]:
                        await client.publish_turn(extra)
                    assert spare is not None
                    proc = spare.run()
                    spare = spare_ingestor(nats_url, data_dir, log) if kills < 3 else None
                # Republishing is harmless: JetStream drops the duplicate by its Nats-Msg-Id.
                if i % 7 == 0:
                    await client.publish_turn(turn)
            for c in range(6):
                await client.flush(f"conv-{c}")
        wm = await WorkingMemory.open(js, "mem")

        async def settled() -> bool:
            _, pending, unacked = await consumer_progress(js, tenant)
            if pending or unacked:
                return False
            for t, conv in await wm.conversations(tenant):
                buffer = await wm.get(t, conv)
                if buffer and (buffer.open or buffer.sealed):
                    return False
            return True

        await eventually(settled, timeout_s=120, interval_s=0.5)
    finally:
        if spare is not None:
            spare.discard()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        await nc.close()
    assert kills == 3
    store = EdgeStore.open(data_dir / "qdrant", 384)
    try:
        ids = await stored_turn_ids(store, tenant)
    finally:
        await store.close()
    counts = Counter(ids)
    lost = {t.turn_id for t in turns} - set(counts)
    doubled = [k for k, v in counts.items() if v > 1]
    assert not lost, f"lost {len(lost)} turns: {sorted(lost)[:10]}\n{log.read_text()[-3000:]}"
    assert not doubled, f"stored twice: {doubled[:10]}"
    assert len(ids) == len(turns)
