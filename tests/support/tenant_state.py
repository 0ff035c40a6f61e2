"""Everything engram holds of one tenant, read so that two readings can be compared: its turns stream, its keys in
every bucket engram keeps, its dead letters, and its stored entries."""
import hashlib
from dataclasses import dataclass

from nats.aio.client import Client
from nats.js.errors import NotFoundError

from shared.messaging import streams
from shared.store import EntryFilter, Scope, Store, all_entries
from shared.working_memory.buckets import bucket_names, summaries_bucket_name
from shared.working_memory.forgotten import bucket_name as marks_bucket
from tests.support.polling import eventually


@dataclass(frozen=True)
class TenantState:
    """A reading of a tenant's state (hashes of values, so a difference says where, not what)."""

    stream: tuple[int, int, int, int] | None   # messages, bytes, first and last sequence; None: no stream
    buckets: dict[str, dict[str, str]]         # bucket -> key -> digest of the value
    dead_letters: int
    entries: dict[str, str]                    # entry id -> digest of its text and update time


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


async def read_state(nc: Client, store: Store, tenant: str, prefix: str = "mem") -> TenantState:
    """Read the tenant's state now."""
    js = nc.jetstream()
    try:
        info = await js.stream_info(streams.turns_stream(prefix, tenant))
        stream: tuple[int, int, int, int] | None = (info.state.messages, info.state.bytes, info.state.first_seq,
                                                    info.state.last_seq)
    except NotFoundError:
        stream = None
    leases, runs = streams.consolidation_buckets(prefix)
    by_bucket: dict[str, dict[str, str]] = {}
    for bucket in (*bucket_names(prefix), summaries_bucket_name(prefix), marks_bucket(prefix)):
        found = await streams.kv_entries(js, bucket, f"{tenant}.>")
        by_bucket[bucket] = {k: _digest(v) for k, v in found.items()}
    for bucket in (leases, runs):  # keyed by the tenant itself
        found = await streams.kv_entries(js, bucket, tenant)
        by_bucket[bucket] = {k: _digest(v) for k, v in found.items()}
    dlq = await js.stream_info(streams.dlq_stream(prefix), subjects_filter=f"{prefix}.dlq.{tenant}.>")
    everything = EntryFilter(include_superseded=True, include_merged=True)
    entries = {e.id: _digest(f"{e.text}|{e.updated_at.isoformat()}".encode())
               for e in await all_entries(store, Scope(tenant_id=tenant), everything)}
    return TenantState(stream=stream, buckets=by_bucket, dead_letters=sum((dlq.state.subjects or {}).values()),
                       entries=entries)


async def settled_state(nc: Client, store: Store, tenant: str, prefix: str = "mem") -> TenantState:
    """The tenant's state once engram has stopped changing it by itself: its consolidation schedule has recorded the
    tenant, and two readings a second apart agree."""
    _, runs = streams.consolidation_buckets(prefix)
    last: list[TenantState] = []

    async def stable() -> bool:
        now = await read_state(nc, store, tenant, prefix)
        same = bool(last) and last[-1] == now and bool(now.buckets[runs])
        last.append(now)
        return same

    await eventually(stable, timeout_s=90, interval_s=1.0)
    return last[-1]
