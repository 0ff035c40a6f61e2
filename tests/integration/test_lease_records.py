"""The record of each tenant's last run is read whole in one pass, and a tenant taken for a new one never loses
its record: a tenant missing from a read would otherwise have its record overwritten (its next run a full one)."""
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import nats
import pytest

from shared.consolidation.lease import Leases
from shared.messaging import nats_server
from tests.support.ids import unique


@pytest.fixture
async def leases(tmp_path: Path) -> AsyncIterator[Leases]:
    server = nats_server.start(tmp_path / "nats")
    nc = await nats.connect(server.url)
    try:
        yield await Leases.open(nc.jetstream(), unique("p"), "test", 5.0)
    finally:
        await nc.close()
        server.stop()


async def test_every_tenant_s_record_is_read_in_one_pass(leases: Leases) -> None:
    """An empty bucket reads as no records; thirty records read whole, with their slots, every time."""
    tenants = [unique("t") for _ in range(30)]
    assert await leases.last_runs() == {}
    for slot, tenant in enumerate(tenants):
        await leases.finished(tenant, slot)
    for _ in range(20):
        runs = await leases.last_runs()
        assert {t: r.slot for t, r in runs.items()} == {t: slot for slot, t in enumerate(tenants)}


async def test_a_deleted_record_is_left_out_of_the_read(leases: Leases) -> None:
    """A tenant whose record was deleted (the bucket's last message a delete marker) is not in the read."""
    kept, gone = unique("t"), unique("t")
    await leases.finished(kept, 1)
    await leases.finished(gone, 2)
    await leases._runs.delete(gone)
    assert list(await leases.last_runs()) == [kept]


async def test_a_tenant_seen_again_as_new_keeps_its_run_s_record(leases: Leases) -> None:
    """Recording a tenant as seen for the first time writes a record only where there is none: a run's record (its
    start, what the next run looks for changes from) stays as it was."""
    started = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
    ran, new = unique("t"), unique("t")
    await leases.finished(ran, 7, started, "fingerprint", 7)
    await leases.first_seen(ran, 9)
    await leases.first_seen(new, 9)
    await leases.first_seen(new, 10)
    runs = await leases.last_runs()
    assert (runs[ran].slot, runs[ran].started_at, runs[ran].fingerprint) == (7, started, "fingerprint")
    assert (runs[new].slot, runs[new].started_at) == (9, None)
