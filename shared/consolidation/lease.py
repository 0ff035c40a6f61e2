"""One lease per tenant, so that two consolidator replicas never run the same tenant's jobs at once.

A lease is a key in a JetStream key-value bucket whose entries expire after `ttl_s`: taking it is a create (which
fails while another replica holds it), keeping it is an update against the revision this replica wrote (every
third of the TTL), giving it back is a delete against that revision. A holder that crashes stops renewing and
its lease expires, unless a process on the same host sees it is gone and takes it over at once (process.py); a
holder that cannot renew in time learns it has lost the lease and stops its run.
"""
import asyncio
import contextlib
import contextvars
import json
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig
from nats.js.errors import APIError, BucketNotFoundError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from shared.consolidation.fence import FENCE, Fence, Held, LeaseLost
from shared.consolidation.process import Process
from shared.messaging import streams, untrusted
from shared.runtime import metrics

log = logging.getLogger("engram.lease")
R = TypeVar("R")
# JetStream's codes for a write against a revision that is no longer the key's last (a delete publishes directly).
WRONG_LAST_SEQUENCE, WRONG_LAST_SEQUENCE_FOR_SUBJECT = 10071, 10164


async def _bucket(js: JetStreamContext, name: str, ttl_s: float | None, description: str, replicas: int) -> KeyValue:
    try:
        return await js.key_value(name)
    except BucketNotFoundError:
        return await js.create_key_value(KeyValueConfig(bucket=name, history=1, ttl=ttl_s, description=description,
                                                        replicas=replicas))


@dataclass(frozen=True)
class LastRun:
    """The record of a tenant's last finished scheduled run."""

    slot: int                       # -1: never run (the tenant is new)
    started_at: datetime | None = None  # None: the next scheduled run goes over every owner
    fingerprint: str | None = None  # the settings and version it ran with (Consolidation.fingerprint)
    full_slot: int = -1             # the slot of the last scheduled run that went over every owner
    unreadable: bool = False        # a record was there but did not parse: it is written over, never kept

    @classmethod
    def parse(cls, value: bytes | None, key: str = "") -> "LastRun":
        """From the bucket's JSON (records written before `started_at` existed read as full runs due); a record
        that does not parse is reported and reads as never run, so the tenant's next run is a full one and writes a
        good record over it."""
        if not value:
            return cls(slot=-1)
        return untrusted.read(_last_run, value, "runs", key) or cls(slot=-1, unreadable=True)


def _last_run(value: bytes) -> LastRun:
    data = json.loads(value)
    started = data.get("started_at")
    fingerprint = data.get("fingerprint")
    if not isinstance(fingerprint, str | None):
        raise TypeError("a run's fingerprint is not a string")
    started_at = datetime.fromisoformat(started) if started else None
    if started_at is not None and started_at.tzinfo is None:
        raise ValueError("a run's start has no zone")
    slot = data["slot"]  # every record engram wrote has one
    if not isinstance(slot, int) or isinstance(slot, bool):
        raise TypeError("a run's slot is not a number")
    return LastRun(slot=slot, started_at=started_at, fingerprint=fingerprint, full_slot=int(data.get("full_slot", -1)))


class Leases:
    """Tenant leases and the record of each tenant's last finished scheduled run."""

    def __init__(self, js: JetStreamContext, leases: KeyValue, runs: KeyValue, runs_bucket: str, holder: str,
                 ttl_s: float) -> None:
        self._js, self._leases, self._runs, self._runs_bucket = js, leases, runs, runs_bucket
        self.holder, self.ttl_s = holder, ttl_s
        self.process = Process.this()  # named in its leases (process.py)
        self._named = self.process.model_dump() if self.process is not None else None
        self._unreadable: dict[str, int] = {}  # tenant -> the revision of its lease that did not parse

    @classmethod
    async def open(cls, js: JetStreamContext, prefix: str, holder: str, ttl_s: float, replicas: int = 1) -> "Leases":
        """Open (creating on first use, with `replicas`) the buckets; `holder` names this replica in its leases."""
        leases_name, runs_name = streams.consolidation_buckets(prefix)
        leases = await _bucket(js, leases_name, ttl_s, "engram: consolidation lease per tenant (expiring)", replicas)
        runs = await _bucket(js, runs_name, None, "engram: last scheduled consolidation per tenant", replicas)
        return cls(js, leases, runs, runs_name, holder, ttl_s)

    def _value(self) -> bytes:
        return json.dumps({"holder": self.holder, "at": datetime.now(UTC).isoformat(),
                           "process": self._named}).encode()

    async def acquire(self, tenant: str) -> int | None:
        """Take the tenant's lease; its revision, or None if another replica holds it (a holder this process sees
        is gone, on this host, holds it no more: `_take_over`)."""
        revision = await self._create(tenant)
        if revision is None and await self._take_over(tenant):
            revision = await self._create(tenant)
        if revision is not None:
            metrics.lease_changes_total.labels("acquired").inc()
        return revision

    async def _create(self, tenant: str) -> int | None:
        try:
            return await self._leases.create(tenant, self._value())
        except KeyWrongLastSequenceError:
            return None

    async def _take_over(self, tenant: str) -> bool:
        """Delete the tenant's lease when its holder's process is gone (process.py), against the revision read, so
        that a lease renewed or taken meanwhile stays; whether the lease may be free now."""
        if self.process is None:
            return False
        try:
            entry = await self._leases.get(tenant)
        except KeyNotFoundError:
            return True  # expired or given back since
        if self._unreadable.get(tenant) == entry.revision:
            return False  # reported once: a waiting request asks every 0.2 s
        named = untrusted.model(Held, entry.value, "leases", tenant)
        if named is None:
            self._unreadable[tenant] = entry.revision or 0
            return False
        self._unreadable.pop(tenant, None)
        theirs = Process.named(named.process)
        if theirs is None or not self.process.sees_gone(theirs):
            return False
        if not await self._delete(tenant, entry.revision or 0):
            return True  # renewed, taken or given back since: the create that follows tells
        log.warning("took over the consolidation lease of tenant %r from %r, whose process (%d) is gone",
                    tenant, named.holder, theirs.pid)
        metrics.lease_changes_total.labels("taken_over").inc()
        return True

    async def renew(self, tenant: str, revision: int) -> int:
        """Keep the lease; the new revision. Raises LeaseLost when it is no longer this replica's."""
        try:
            return await self._leases.update(tenant, self._value(), last=revision)
        except (KeyWrongLastSequenceError, KeyNotFoundError) as exc:
            metrics.lease_changes_total.labels("lost").inc()
            raise LeaseLost(f"the consolidation lease of tenant {tenant!r} expired or was taken over") from exc

    async def release(self, tenant: str, revision: int) -> None:
        """Give the lease back (if it is still this replica's: a delete against another revision is refused)."""
        if await self._delete(tenant, revision):
            metrics.lease_changes_total.labels("released").inc()

    async def _delete(self, tenant: str, revision: int) -> bool:
        """Delete the tenant's lease if `revision` is still its last; whether it was (else it expired, was given
        back, or was renewed or taken since: someone else's now)."""
        try:
            await self._leases.delete(tenant, last=revision)
        except (KeyWrongLastSequenceError, KeyNotFoundError):
            return False
        except APIError as exc:
            if exc.err_code in (WRONG_LAST_SEQUENCE, WRONG_LAST_SEQUENCE_FOR_SUBJECT):
                return False
            raise
        return True

    async def run(self, tenant: str, job: Callable[[], Coroutine[Any, Any, R]], wait_s: float = 0.0) -> R | None:
        """Run `job` holding the tenant's lease (renewed meanwhile); None if the lease could not be taken.

        Raises LeaseLost (after cancelling the job) when the lease cannot be renewed in time.

        Args:
            wait_s: how long to keep trying while another replica holds the lease.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        revision = await self.acquire(tenant)
        while revision is None and loop.time() < deadline:
            await asyncio.sleep(min(0.2, self.ttl_s / 4))
            revision = await self.acquire(tenant)
        if revision is None:
            return None
        fence = Fence(self._leases, tenant, self.holder, self.ttl_s, revision)
        context = contextvars.copy_context()
        context.run(FENCE.set, fence)  # the job's writes check it (fence.py)
        task: asyncio.Task[R] = asyncio.create_task(job(), name=f"consolidate-{tenant}", context=context)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.ttl_s / 3)
                if done:
                    return task.result()
                try:
                    sent_at = time.monotonic()
                    revision = await self.renew(tenant, revision)
                    fence.renewed(revision, sent_at)
                except LeaseLost:
                    log.warning("lost the consolidation lease of tenant %r; stopping its run", tenant)
                    raise
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            await self.release(tenant, revision)

    async def last_slot(self, tenant: str) -> int:
        """The schedule slot of the tenant's last finished scheduled run (-1 if none)."""
        return (await self.last_run(tenant)).slot

    async def last_run(self, tenant: str) -> LastRun:
        """The record of the tenant's last finished scheduled run (slot -1 if none)."""
        try:
            entry = await self._runs.get(tenant)
        except KeyNotFoundError:
            return LastRun(slot=-1)
        return LastRun.parse(entry.value, tenant)

    async def last_runs(self) -> dict[str, LastRun]:
        """Every tenant's record, read in one pass over the bucket (one request per tenant would make a pass over
        10,000 tenants take seconds), and whole: a tenant missing from it would be taken for a new one."""
        records = await streams.kv_entries(self._js, self._runs_bucket, ">")
        return {tenant: LastRun.parse(value, tenant) for tenant, value in records.items()}

    async def first_seen(self, tenant: str, slot: int, *, over_unreadable: bool = False) -> None:
        """Record a tenant seen for the first time (its first run is due from the next slot), unless a record is
        there already: another replica's, or a run's that a stale read missed, which must not be overwritten. A
        record that did not parse (`over_unreadable`) is written over, so the tenant is scheduled again."""
        if over_unreadable:
            await self._runs.put(tenant, self._record(slot))
            return
        with contextlib.suppress(KeyWrongLastSequenceError):
            await self._runs.create(tenant, self._record(slot))

    async def finished(self, tenant: str, slot: int, started_at: datetime | None = None,
                       fingerprint: str | None = None, full_slot: int = -1) -> None:
        """Record that the tenant's run of this slot finished (started at `started_at`: the next run looks for
        changes from then on; None makes the next run a full one)."""
        await self._runs.put(tenant, self._record(slot, started_at, fingerprint, full_slot))

    def _record(self, slot: int, started_at: datetime | None = None, fingerprint: str | None = None,
                full_slot: int = -1) -> bytes:
        return json.dumps({"slot": slot, "by": self.holder, "at": datetime.now(UTC).isoformat(),
                           "started_at": started_at.isoformat() if started_at else None, "fingerprint": fingerprint,
                           "full_slot": full_slot}).encode()

    async def full_next(self, tenant: str) -> None:
        """Make the tenant's next scheduled run go over every owner: a deletion leaves no `updated_at` behind to
        find its owner by. Call it holding the tenant's lease, or a run in progress could record over it."""
        last = await self.last_run(tenant)
        if last.slot >= 0 and last.started_at is not None:
            await self.finished(tenant, last.slot, None, last.fingerprint, last.full_slot)
