"""The record of each tenant's last run is read whole in one pass, also when the watcher's "all delivered" marker
comes before the records: a tenant missing from the read would be taken for a new one and its record overwritten."""
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.kv import KeyValue

from shared.consolidation.lease import Leases
from shared.messaging import nats_server
from tests.support.ids import unique

TENANTS = [f"t{i:02d}" for i in range(30)]


@pytest.fixture
async def leases(tmp_path: Path) -> AsyncIterator[Leases]:
    server = nats_server.start(tmp_path / "nats")
    nc = await nats.connect(server.url)
    try:
        yield await Leases.open(nc.jetstream(), unique("p"), "test", 5.0)
    finally:
        await nc.close()
        server.stop()


async def _record(leases: Leases) -> None:
    for slot, tenant in enumerate(TENANTS):
        await leases.finished(tenant, slot)


async def test_every_tenant_s_record_is_read_in_one_pass(leases: Leases) -> None:
    """An empty bucket reads as no records; thirty records read whole, with their slots, every time."""
    assert await leases.last_runs() == {}
    await _record(leases)
    for _ in range(20):
        runs = await leases.last_runs()
        assert sorted(runs) == TENANTS
        assert [runs[t].slot for t in TENANTS] == list(range(len(TENANTS)))


async def test_a_marker_sent_before_the_records_arrive_does_not_cut_the_read_short(
        leases: Leases, monkeypatch: pytest.MonkeyPatch) -> None:
    """nats-py puts its marker in the queue when the consumer reports nothing pending and no message has reached
    the client yet, which also happens while the messages are on their way. Here the marker is put first."""
    await _record(leases)
    real = KeyValue.watch

    async def marker_first(self: KeyValue, keys: str, **kwargs: Any) -> Any:
        watcher = await real(self, keys, **kwargs)
        queued = []
        while not watcher._updates.empty():
            queued.append(watcher._updates.get_nowait())
        for item in [None, *queued]:
            watcher._updates.put_nowait(item)
        return watcher

    monkeypatch.setattr(KeyValue, "watch", marker_first)
    assert sorted(await leases.last_runs()) == TENANTS


async def test_a_deleted_record_last_in_the_bucket_ends_the_read(leases: Leases) -> None:
    """A delete as the bucket's last message (the watcher skips deletes) still ends the read, without the tenant."""
    await _record(leases)
    await leases._runs.delete(TENANTS[-1])
    assert sorted(await leases.last_runs()) == TENANTS[:-1]
