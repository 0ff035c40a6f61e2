"""Two consolidators against one NATS: each tenant runs once per interval, and a lease holder killed mid-run is
replaced by the other replica, with the same result as a clean run."""
import asyncio
import contextvars
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engram_client import MemoryClient, connection, wait_until_stored
from engram_client.errors import Unavailable
from services.stack import running
from shared.consolidation import run as runs
from shared.consolidation import schedule
from shared.consolidation.lease import Leases
from shared.messaging import streams
from shared.settings import Settings
from tests.support.ids import unique
from tests.support.memory import memory_without_ids
from tests.support.polling import eventually
from tests.support.stacks import fast_settings
from tests.support.turns import conversation

MAY = datetime(2024, 5, 6, 10, 0, tzinfo=UTC)
LINES = [("Ana", "I live in Lisbon."), ("Bo", "Nice."), ("Ana", "I work at Google."), ("Bo", "Cool."),
         ("Ana", "I moved to Porto."), ("Bo", "Wow."), ("Ana", "I love hiking."), ("Bo", "Same.")]


def replicated(folder: Path, **overrides: Any) -> Settings:
    return fast_settings(folder).model_copy(update=overrides)


async def publish(nats_url: str, tenant: str, duplicate: bool = True) -> None:
    turns = [t for i, line in enumerate(LINES)
             for t in conversation([line], f"c{i}", MAY + timedelta(days=20 * i), user_id="ana")]
    if duplicate:
        turns += [t.model_copy(update={"conversation_id": "again", "turn_id": f"again-{i}"})
                  for i, t in enumerate(conversation(LINES, "x", MAY, user_id="ana"))]
        turns += [t.model_copy(update={"conversation_id": "twice", "turn_id": f"twice-{i}"})
                  for i, t in enumerate(conversation(LINES, "x", MAY + timedelta(hours=2), user_id="ana"))]
    async with await MemoryClient.connect(nats_url, tenant) as client:
        await client.publish_turns(turns)
        for conversation_id in dict.fromkeys(t.conversation_id for t in turns):
            await client.flush(conversation_id)
        await wait_until_stored(client, turns, timeout_s=60)


async def memory(nats_url: str, tenant: str) -> list[tuple[Any, ...]]:
    """The tenant's memory without its ids (which embed the tenant), for comparing two tenants."""
    async with await MemoryClient.connect(nats_url, tenant) as client:
        return memory_without_ids((await client.entries(op="list", limit=500)).entries)


async def test_each_tenant_runs_once_per_interval_across_two_replicas(tmp_path: Path, nats_url: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """With two consolidator replicas, each tenant is consolidated at most once per interval slot, and in at least
    three slots."""
    # Each finished scheduled run is counted under the slot the scheduler ran it for (what it records), not under the
    # wall clock when it was called: on a busy machine a run late in its slot may start in the next one.
    runs_of: Counter[tuple[str, int]] = Counter()
    interval_s = 1.5
    real = Leases.finished

    async def counted(self: Leases, tenant: str, slot: int, started_at: datetime | None = None,
                      fingerprint: str | None = None, full_slot: int = -1) -> None:
        await real(self, tenant, slot, started_at, fingerprint, full_slot)
        if started_at is not None:  # a run's record (a tenant seen for the first time is recorded without one)
            runs_of[(tenant, slot)] += 1

    monkeypatch.setattr(Leases, "finished", counted)
    settings = replicated(tmp_path, consolidate_interval_s=interval_s, lease_ttl_s=3.0)
    tenants = [unique("t"), unique("t"), unique("t")]
    async with running(settings, nats_url=nats_url, consolidators=2):
        for tenant in tenants:
            await publish(nats_url, tenant, duplicate=False)
        await eventually(lambda: runs_of,
                         lambda r: all(sum(n for (t, _), n in r.items() if t == tenant) >= 3 for tenant in tenants),
                         timeout_s=30, interval_s=0.2)
    print(f"runs per (tenant, slot) over {len({s for _, s in runs_of})} slots: {sorted(runs_of.items())}")
    assert max(runs_of.values()) == 1, runs_of  # never twice in one interval
    for tenant in tenants:
        slots = sorted(s for t, s in runs_of if t == tenant)
        assert len(slots) == len(set(slots)) >= 3


async def test_a_lease_holder_killed_mid_run_is_replaced_with_the_same_result(tmp_path: Path, nats_url: str,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """When the replica holding a tenant's lease dies mid-run, the other replica finishes the tenant after the lease
    expires, leaving the memory a clean run leaves."""
    crashed, clean = unique("t"), unique("t")
    armed, paused, release = asyncio.Event(), asyncio.Event(), asyncio.Event()
    # Armed once every turn is stored: only a run that started after that hangs, one over the whole memory, not one
    # that started while the turns were still coming in.
    armed_at_start = contextvars.ContextVar("armed_at_start", default=False)
    real_merge, real_measured = runs._merge, schedule.measured

    async def measured(*args: Any, **kwargs: Any) -> Any:  # a scheduled run, in its own task
        armed_at_start.set(armed.is_set())
        return await real_measured(*args, **kwargs)

    async def merge_then_hang(c: runs.Consolidation, owner: runs.Owner, apply: Any) -> int:
        merged = await real_merge(c, owner, apply)  # half the jobs written: scores, supersede, merge
        if owner.tenant == crashed and armed_at_start.get() and not paused.is_set():
            paused.set()
            await release.wait()  # the holder hangs here until it is killed
        return merged

    monkeypatch.setattr(runs, "_merge", merge_then_hang)
    monkeypatch.setattr(schedule, "measured", measured)
    settings = replicated(tmp_path, consolidate_interval_s=1.0, lease_ttl_s=2.0)
    async with running(settings, nats_url=nats_url, consolidators=2) as state:
        await publish(nats_url, crashed)
        await publish(nats_url, clean)
        armed.set()
        await asyncio.wait_for(paused.wait(), 30)
        leases_bucket, runs_bucket = streams.consolidation_buckets("mem")
        holder_kv = await state.consolidator_deps[0].broker.connection.jetstream().key_value(leases_bucket)
        holder = json.loads((await holder_kv.get(crashed)).value or b"{}")["holder"]
        index = next(i for i, d in enumerate(state.consolidator_deps) if d.leases.holder == holder)
        victim, other = state.consolidator_deps[index], state.consolidator_deps[1 - index]
        runs_kv = await other.broker.connection.jetstream().key_value(runs_bucket)
        before = (await runs_kv.get(crashed)).revision or 0
        # Kill it: its connection drops (the lease is neither renewed nor given back) and its run stops.
        await victim.broker.connection.close()
        await state.consolidators[index].stop()

        async def finished() -> tuple[int, dict[str, Any]]:
            entry = await runs_kv.get(crashed)
            return entry.revision or 0, json.loads(entry.value or b"{}")

        # The other replica takes over once the lease expires, and finishes the tenant: a record of a run it made
        # (a record without `started_at` only says a replica has seen the tenant).
        await eventually(finished, lambda f: f[0] > before and f[1].get("by") == other.leases.holder
                         and f[1].get("started_at") is not None, timeout_s=30)
        release.set()
        async with await MemoryClient.connect(nats_url, clean) as client:
            await client.consolidate()
        assert await memory(nats_url, crashed) == await memory(nats_url, clean)


async def test_a_forget_or_consolidate_waiting_past_the_lease_ttl_for_another_holder_is_answered_unavailable(
        tmp_path: Path, nats_url: str) -> None:
    """While another replica keeps a tenant's lease, `consolidate` and `forget` wait up to ENGRAM_LEASE_TTL_S and
    then answer `unavailable` ("ask again later"); once the lease is given back, the same requests are served."""
    tenant = unique("t")
    settings = replicated(tmp_path, lease_ttl_s=1.0)
    async with running(settings, nats_url=nats_url, ingestors=0, retrievers=0, consolidators=1), \
            await MemoryClient.connect(nats_url, tenant) as client:
        nc = await connection.connect(nats_url, "other-replica")
        other = await Leases.open(nc.jetstream(), settings.subject_prefix, "other-replica", settings.lease_ttl_s)
        revision = await other.acquire(tenant)
        assert revision is not None
        holding = asyncio.Event()

        async def keep() -> None:  # renewed as a live holder does, well inside the lease's TTL
            nonlocal revision
            while not holding.is_set():
                assert revision is not None
                revision = await other.renew(tenant, revision)
                await asyncio.sleep(settings.lease_ttl_s / 5)

        keeper = asyncio.create_task(keep())
        try:
            with pytest.raises(Unavailable, match="ask again later"):
                await client.consolidate()
            with pytest.raises(Unavailable, match="ask again later"):
                await client.forget(user_id="ana")
        finally:
            holding.set()
            await keeper
            await other.release(tenant, revision)
            await nc.close()
        assert (await client.consolidate()).owners == 0
        assert (await client.forget(user_id="ana")).verified
