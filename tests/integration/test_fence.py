"""A consolidation run writes only while it holds its tenant's lease (real nats-server, real Qdrant Edge): a run whose
lease another replica took over, or that was paused past the lease's TTL, writes nothing more and stops."""
import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest

from shared.consolidation.fence import FENCE_SHARE, Fence, FencedStore, LeaseLost
from shared.consolidation.lease import Leases
from shared.messaging import nats_server
from shared.store import EdgeStore, Scope
from tests.support.ids import unique

TTL_S = 30.0  # long: no renewal happens during a test, so only the takeover or the clock can end the lease


@dataclass
class Held:
    """Two replicas' leases over one bucket, and a store."""

    ours: Leases
    theirs: Leases
    store: EdgeStore


@pytest.fixture
async def held(tmp_path: Path) -> AsyncIterator[Held]:
    server = nats_server.start(tmp_path / "nats")
    nc = await nats.connect(server.url)
    store = EdgeStore.open(tmp_path / "qdrant", 8)
    prefix = unique("p")
    try:
        js = nc.jetstream()
        yield Held(await Leases.open(js, prefix, "replica-a", TTL_S), await Leases.open(js, prefix, "replica-b", TTL_S),
                   store)
    finally:
        await store.close()
        await nc.close()
        server.stop()


async def test_a_run_whose_lease_was_taken_over_writes_nothing(held: Held) -> None:
    """While a run waits (paused, as far as its lease can tell), its lease is deleted and taken by another replica;
    when the run then writes through its fenced store, the write is refused with LeaseLost and the run ends with it;
    the entry it meant to change is as it was."""
    tenant = unique("t")
    store = FencedStore(held.store)
    resume = asyncio.Event()
    taken = asyncio.Event()

    async def job() -> None:
        taken.set()
        await resume.wait()
        await store.delete(Scope(tenant_id=tenant), ["00000000-0000-0000-0000-000000000001"])

    run = asyncio.create_task(held.ours.run(tenant, job))
    await taken.wait()
    await held.ours._leases.purge(tenant)
    assert await held.theirs.acquire(tenant) is not None
    resume.set()
    with pytest.raises(LeaseLost):
        await run


async def test_a_run_paused_past_its_lease_is_refused_by_its_own_clock(held: Held) -> None:
    """A fence last renewed longer ago than FENCE_SHARE of the TTL (a run that was paused) refuses the write without
    asking the server, even though the lease key still names it."""
    tenant = unique("t")
    revision = await held.ours.acquire(tenant)
    assert revision is not None
    fence = Fence(held.ours._leases, tenant, held.ours.holder, TTL_S, revision,
                  renewed_at=time.monotonic() - FENCE_SHARE * TTL_S - 1)
    with pytest.raises(LeaseLost, match="last renewed"):
        await fence.check()
    fresh = Fence(held.ours._leases, tenant, held.ours.holder, TTL_S, revision)
    await fresh.check()  # the same lease, renewed just now: writes go through


async def test_writes_outside_a_leased_run_are_not_fenced(held: Held) -> None:
    """The fence travels with a leased run's task only: a fenced store used elsewhere (a test, a tool) writes."""
    tenant = unique("t")
    assert await FencedStore(held.store).delete(Scope(tenant_id=tenant), ["00000000-0000-0000-0000-000000000001"]) == 0


async def test_a_lease_overwritten_with_what_is_no_lease_fences_the_run_off(held: Held) -> None:
    """A lease key overwritten with a value that is no lease (nested past any parser's depth) is reported as
    unreadable and read as nobody's: the run's fence refuses its writes (LeaseLost), it does not crash on it."""
    tenant = unique("t")
    revision = await held.ours.acquire(tenant)
    assert revision is not None
    fence = Fence(held.ours._leases, tenant, held.ours.holder, TTL_S, revision)
    await fence.check()
    await held.ours._leases.put(tenant, b"[" * 100_000)
    fence.checked_at = 0.0  # ask the server now
    with pytest.raises(LeaseLost, match="no longer this replica's"):
        await fence.check()
