"""Idle detection at scale: working memory holding many finished conversations and a few open ones.

The closer's sweep follows the open index, so it reads only conversations with turns waiting; the old sweep listed
every key of the bucket and read every buffer, every 2 s, on every replica. Both are timed here on the same data
(the old one as its algorithm, run against this layout: list all buffers, read each).
"""
import asyncio
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engram_client import connection
from engram_client.contract import Turn
from shared.ingest.accept import accept_turn
from shared.ingest.closer import WindowCloser
from shared.ingest.policy import CloserPolicy, WindowPolicy
from shared.messaging import nats_server
from shared.working_memory import WorkingMemory
from shared.working_memory import buckets as working_memory
from shared.working_memory.buffer import Buffer, Recent, digest

TENANT = "sweep"
POLICY = WindowPolicy(window_turns=4, recent_turns=20, max_pending_windows=32)


async def _fill_idle(wm: WorkingMemory, count: int, batch: int = 500) -> None:
    """`count` finished conversations: a buffer each, with recent turns and seen ids but nothing waiting."""
    when = datetime(2024, 1, 1, tzinfo=UTC)
    value = Buffer(tenant_id=TENANT, conversation_id="x", seen=[digest(f"t{i}") for i in range(8)],
                   recent=[Recent(seq=i, ts=when) for i in range(8)], tail=7, last_turn_at=when,
                   flushed_through=9).model_dump_json().encode()
    for start in range(0, count, batch):
        await asyncio.gather(*(wm.buffers.put(working_memory.key(TENANT, f"done-{i}"), value)
                               for i in range(start, min(count, start + batch))))


async def _timed(coro: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    result = await coro
    return result, (time.perf_counter() - started) * 1e3


async def run(idle_keys: int, open_conversations: int = 100) -> dict[str, Any]:
    """Fill working memory, then time each way of finding idle windows."""
    with tempfile.TemporaryDirectory(prefix="engram-sweep-") as tmp:
        server = nats_server.start(Path(tmp) / "nats")
        nc = await connection.connect(server.url, "bench-sweep")
        try:
            wm = await WorkingMemory.open(nc.jetstream(), "mem", ttl_s=None)
            _, fill_ms = await _timed(_fill_idle(wm, idle_keys))
            now = datetime.now(UTC)
            for c in range(open_conversations):
                turn = Turn(conversation_id=f"open-{c}", turn_id="t1", speaker="Ana", role="user",
                            text="still talking", ts=now)
                await accept_turn(wm, tenant=TENANT, turn=turn, seq=c + 1, policy=POLICY, now=now)

            async def nothing(*_: object) -> None:
                return None

            policy = CloserPolicy(idle_timeout_s=3600, sweep_interval_s=2, seal_grace_s=30, max_deliver=5)
            closer = WindowCloser(wm, None, nothing, nothing, policy)  # type: ignore[arg-type]  # reads only
            stopping = asyncio.Event()
            started = time.perf_counter()
            follower = asyncio.create_task(closer.open.follow(stopping))
            while len(closer.open.due_at) < open_conversations:
                await asyncio.sleep(0.001)
            index_ms = (time.perf_counter() - started) * 1e3
            steady, steady_ms = await _timed(closer.sweep(now))
            due, due_ms = await _timed(closer.sweep(now + timedelta(seconds=31)))
            stopping.set()
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)

            async def old_sweep() -> int:
                listed = await wm.conversations()
                for tenant, conversation_id in listed:
                    await wm.get(tenant, conversation_id)
                return len(listed)

            old_read, old_ms = await _timed(old_sweep())
        finally:
            await nc.close()
            server.stop()
    return {"idle_keys": idle_keys, "open_conversations": open_conversations, "fill_s": fill_ms / 1e3,
            "index_listing_ms": index_ms, "sweep_nothing_due": {"read": steady, "ms": steady_ms},
            "sweep_all_open_due": {"read": due, "ms": due_ms},
            "old_sweep_every_key": {"read": old_read, "ms": old_ms}}
