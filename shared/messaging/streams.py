"""JetStream streams engram owns, named and created in one place, and the listing of a key-value bucket's keys.

Each tenant's turns and flushes have a stream of their own (`MEM_TURNS_<tenant>`, created when the tenant's first
message arrives, see provision.py): its de-duplication window, its storage quota and its consumer are the tenant's
alone, so one product can neither make another's turn a duplicate, nor fill the storage another's turns need, nor
hold the consumer slots another's turns wait for. An engram from before kept every tenant in one stream
(`MEM_TURNS`, "legacy"): while that stream exists engram keeps consuming it as it is (docs/operations/upgrades.md).
"""
import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import NotFoundError
from nats.js.kv import KV_MARKER_REASON, KV_OP

from engram_client import subjects
from engram_client.errors import Timeout, Unavailable
from shared.errors import ConfigError
from shared.messaging.connection import transient

log = logging.getLogger("engram.streams")
T = TypeVar("T")
_LISTING_BATCH, _LISTING_FETCH_S, _LISTING_IDLE_S = 1_000, 5.0, 60.0
_NAMES_API = "$JS.API.STREAM.NAMES"
# A JetStream cluster answers "unavailable" for a while when it is busy (a leader change, a node catching up); a
# throw-away consumer's creation is tried again after these pauses before the failure is the caller's.
_SETUP_PAUSES_S = (0.5, 1.0, 2.0, 4.0)


def _base(prefix: str) -> str:
    return prefix.upper().replace("-", "_")


def legacy_turns_stream(prefix: str) -> str:
    """Name of the one stream an engram from before held every tenant's turns in (`MEM_TURNS`)."""
    return f"{_base(prefix)}_TURNS"


def turns_stream(prefix: str, tenant: str) -> str:
    """Name of the stream carrying one tenant's turns and flushes (`MEM_TURNS_<tenant>` for the default prefix)."""
    return f"{_base(prefix)}_TURNS_{tenant}"


def turns_subjects(prefix: str, tenant: str | None = None) -> list[str]:
    """Subjects of a tenant's turns stream, in one order: its turns and flushes (every tenant's when None)."""
    if tenant is None:
        return [subjects.nats_wildcard(subjects.turns(prefix)), subjects.nats_wildcard(subjects.flush(prefix))]
    return [subjects.turns(prefix, tenant), subjects.flush(prefix, tenant)]


def kv_stream(bucket: str) -> str:
    """The stream behind a key-value bucket (`KV_<bucket>`, as NATS names it)."""
    return f"KV_{bucket}"


def dlq_stream(prefix: str) -> str:
    """Name of the dead-letter stream."""
    return f"{_base(prefix)}_DLQ"


def dlq_subjects(prefix: str) -> list[str]:
    """Subjects the dead-letter stream captures."""
    return [subjects.nats_wildcard(subjects.dlq(prefix, service="*"))]


def consolidation_buckets(prefix: str) -> tuple[str, str]:
    """Names of the key-value buckets of tenant leases (keys expire) and of finished runs (`MEM_CONSOLIDATION_…`)."""
    base = f"{_base(prefix)}_CONSOLIDATION"
    return f"{base}_LEASES", f"{base}_RUNS"


DEFAULT_CLUSTER_REPLICAS = 3


def replicas(server_info: dict[str, Any], wanted: int | None) -> int:
    """How many replicas engram gives the streams and buckets it creates.

    Args:
        server_info: the INFO the connected server sent (`connection.server_info`): a server of a cluster names
            its cluster. (Its `connect_urls` cannot count the members: a server listening on every interface lists
            one URL per address.)
        wanted: ENGRAM_NATS_REPLICAS; None picks what the server allows: 1 on a single server, 3 on a cluster
            (JetStream's recommended size; a cluster of two needs the setting).

    Raises:
        ConfigError: more replicas than a single server can hold.
    """
    clustered = bool(server_info.get("cluster"))
    if wanted is None:
        return DEFAULT_CLUSTER_REPLICAS if clustered else 1
    if wanted > 1 and not clustered:
        raise ConfigError(f"ENGRAM_NATS_REPLICAS={wanted} but the NATS server "
                          f"{server_info.get('server_name', '?')!r} is not part of a cluster; set it to 1 (or unset "
                          "it), or run a JetStream cluster of at least that many servers")
    return wanted


INGESTOR_DURABLE = "ingestor"
TURNS_DUPLICATE_WINDOW_S = subjects.TURNS_DUPLICATE_WINDOW_S
DLQ_MAX_AGE_S = 14 * 24 * 3600.0
DEFAULT_TURN_RETENTION_S = 30 * 24 * 3600.0


@dataclass(frozen=True)
class TurnsLimits:
    """What NATS itself enforces on one tenant's turns stream: a publish past either limit is refused to that tenant
    (`maximum bytes exceeded`, `message size exceeds maximum allowed`) and to no one else."""

    max_bytes: int = 1024 ** 3        # the turns it keeps (for the retention period, for rebuilds)
    max_message_bytes: int = 256 * 1024


@dataclass(frozen=True)
class TurnsStream:
    """A stream holding turns, and the subjects of one tenant in it (the stream's own subjects for a tenant's)."""

    name: str
    tenant: str | None            # None: the legacy stream of every tenant
    filter_subjects: tuple[str, ...]


def _turns_config(prefix: str, tenant: str, limits: TurnsLimits, turn_retention_s: float | None,
                  num_replicas: int) -> StreamConfig:
    return StreamConfig(name=turns_stream(prefix, tenant), subjects=turns_subjects(prefix, tenant),
                        storage=StorageType.FILE, retention=RetentionPolicy.LIMITS, max_age=turn_retention_s or 0.0,
                        duplicate_window=TURNS_DUPLICATE_WINDOW_S, num_replicas=num_replicas,
                        max_bytes=limits.max_bytes, max_msg_size=limits.max_message_bytes,
                        discard=DiscardPolicy.NEW,  # never drop a turn not yet in memory: refuse the new one
                        description=f"engram: tenant {tenant}'s chat turns and flushes, kept for rebuilds")


async def ensure_tenant(js: JetStreamContext, prefix: str, tenant: str, limits: TurnsLimits,
                        turn_retention_s: float | None = DEFAULT_TURN_RETENTION_S, num_replicas: int = 1) -> bool:
    """Create the tenant's turns stream, or bring its subjects, age and limits up to date; True if it was created.

    An existing stream keeps the replicas it has (an operator may have changed them).
    """
    config = _turns_config(prefix, tenant, limits, turn_retention_s, num_replicas)
    assert config.name is not None
    with transient(f"creating tenant {tenant}'s turns stream"):
        try:
            info = await js.stream_info(config.name)
        except NotFoundError:
            await js.add_stream(config)
            return True
        have = info.config
        if (sorted(have.subjects or []), have.max_age or 0.0, have.max_bytes, have.max_msg_size, have.discard) != \
                (sorted(config.subjects or []), config.max_age or 0.0, config.max_bytes, config.max_msg_size,
                 config.discard):
            config.num_replicas = have.num_replicas
            await js.update_stream(config)
    return False


async def ensure(js: JetStreamContext, prefix: str, num_replicas: int = 1, dlq_per_tenant: int = 10_000) -> None:
    """Create the dead-letter stream, or bring its subjects and limits up to date.

    Each tenant's dead letters of one service are one subject (`mem.dlq.<tenant>.<service>`), of which the stream
    keeps the newest `dlq_per_tenant`: a tenant that sends nothing but poison pushes out its own oldest dead letters,
    never another tenant's. (Turns streams are per tenant, made by `ensure_tenant`.)
    """
    config = StreamConfig(name=dlq_stream(prefix), subjects=dlq_subjects(prefix), storage=StorageType.FILE,
                          retention=RetentionPolicy.LIMITS, max_age=DLQ_MAX_AGE_S, num_replicas=num_replicas,
                          max_msgs_per_subject=dlq_per_tenant,
                          description="engram: messages that could not be processed, reason in headers")
    assert config.name is not None
    try:
        info = await js.stream_info(config.name)
    except NotFoundError:
        await js.add_stream(config)
        return
    have = info.config
    if (sorted(have.subjects or []), have.max_age or 0.0, have.max_msgs_per_subject) != \
            (sorted(config.subjects or []), config.max_age or 0.0, config.max_msgs_per_subject):
        config.num_replicas = have.num_replicas  # an operator may have raised it: keep it
        await js.update_stream(config)


async def legacy(js: JetStreamContext, prefix: str) -> RetentionPolicy | None:
    """The retention of the legacy stream of every tenant's turns (`MEM_TURNS`), None when there is none."""
    with transient("looking for the legacy turns stream"):
        try:
            info = await js.stream_info(legacy_turns_stream(prefix))
        except NotFoundError:
            return None
    return info.config.retention


async def _stream_names(nc: Client, subject: str) -> list[str]:
    """Names of the streams of the account whose subjects overlap `subject`, every page of them."""
    names: list[str] = []
    while True:
        with transient("listing streams"):
            reply = await nc.request(_NAMES_API, json.dumps({"subject": subject, "offset": len(names)}).encode(),
                                     timeout=5.0)
        page: dict[str, Any] = json.loads(reply.data)
        if "error" in page:
            raise ConfigError(f"listing streams failed: {page['error'].get('description', page['error'])}")
        found = page.get("streams") or []
        names += found
        if not found or len(names) >= int(page.get("total", 0)):
            return names


async def tenant_streams(nc: Client, prefix: str) -> dict[str, str]:
    """Every tenant that has a turns stream, with its stream's name (the legacy stream is not among them)."""
    base = turns_stream(prefix, "")
    return {name.removeprefix(base): name for name in await _stream_names(nc, turns_subjects(prefix)[0])
            if name.startswith(base) and name != legacy_turns_stream(prefix)}


async def holding(js: JetStreamContext, prefix: str, tenant: str) -> TurnsStream | None:
    """The stream holding the tenant's turns: its own, else the legacy stream of every tenant, else None."""
    with transient(f"looking for tenant {tenant}'s turns stream"):
        for name, owner in ((turns_stream(prefix, tenant), tenant), (legacy_turns_stream(prefix), None)):
            try:
                await js.stream_info(name)
            except NotFoundError:
                continue
            return TurnsStream(name=name, tenant=owner, filter_subjects=tuple(turns_subjects(prefix, tenant)))
    return None


async def every_turns_stream(js: JetStreamContext, nc: Client, prefix: str) -> list[TurnsStream]:
    """Every stream holding turns: the legacy one first (if any), then each tenant's."""
    found = [TurnsStream(name=name, tenant=tenant, filter_subjects=tuple(turns_subjects(prefix, tenant)))
             for tenant, name in sorted((await tenant_streams(nc, prefix)).items())]
    if await legacy(js, prefix) is not None:
        found.insert(0, TurnsStream(name=legacy_turns_stream(prefix), tenant=None,
                                    filter_subjects=tuple(turns_subjects(prefix))))
    return found


def ingestor_consumer(stream: TurnsStream, ack_wait_s: float, max_ack_pending: int) -> ConsumerConfig:
    """The durable consumer all ingestor replicas share over one turns stream (each message goes to one of them).

    Deliveries are unlimited: engram's own settle decides when a failing message is dead-lettered, and a turn
    held back by back-pressure must wait as long as it takes rather than be dropped by the server. Its slots
    (`max_ack_pending`) are its tenant's alone: turns that wait hold no slot another tenant's turns need.
    """
    return ConsumerConfig(durable_name=INGESTOR_DURABLE, ack_policy=AckPolicy.EXPLICIT,
                          deliver_policy=DeliverPolicy.ALL, filter_subjects=list(stream.filter_subjects),
                          ack_wait=ack_wait_s, max_deliver=-1, max_ack_pending=max_ack_pending)


async def kv_keys(js: JetStreamContext, bucket: str, pattern: str) -> list[str]:
    """Every current key of the bucket matching the subject pattern, exactly (see `kv_entries`)."""
    return list(await kv_entries(js, bucket, pattern, values=False))


async def kv_entries(js: JetStreamContext, bucket: str, pattern: str, values: bool = True) -> dict[str, bytes]:
    """Every current key of the bucket matching the subject pattern, exactly, with its value (b"" unless `values`).

    KeyValue.keys(filters=...) matches substrings, not subjects, and a watch can signal "all seen" before the
    first key arrives (its consumer info may overtake deliveries). A pull consumer delivers only when asked, so
    its pending count at creation is exact, and each message says how many are still to come.
    """
    found: dict[str, bytes] = {}
    stream, prefix = kv_stream(bucket), subjects.kv_key(bucket, "")
    name = f"engram-keys-{uuid.uuid4().hex}"
    config = ConsumerConfig(name=name, filter_subject=prefix + pattern, deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
                            ack_policy=AckPolicy.NONE, headers_only=not values, mem_storage=True,
                            inactive_threshold=_LISTING_IDLE_S, num_replicas=1)
    pending = await _throwaway_consumer(js, stream, config, f"listing keys of {pattern!r}")
    with transient(f"listing keys of {pattern!r}"):
        sub = await js.pull_subscribe_bind(consumer=name, stream=stream)
        try:
            while pending:
                for msg in await _fetch(sub, min(pending, _LISTING_BATCH), f"listing keys of {pattern!r}"):
                    pending = msg.metadata.num_pending
                    headers = msg.headers or {}
                    if not (headers.get(KV_OP) or headers.get(KV_MARKER_REASON)):  # not a delete/purge/expiry
                        found[msg.subject.removeprefix(prefix)] = msg.data if values else b""
        finally:
            await sub.unsubscribe()
            with contextlib.suppress(NatsError):
                await js.delete_consumer(stream, name)  # or it idles out after _LISTING_IDLE_S
    return found


async def matching(js: JetStreamContext, stream: str, subject: str, match: Callable[[bytes], bool]) -> list[int]:
    """Sequences of the messages of `stream` on `subject` (a wildcard allowed) whose data `match`es.

    Reads through a throw-away consumer filtered on `subject`, a batch at a time (a month of retained turns is read
    in seconds); a stream made as a work queue by an older engram admits no second consumer, so there it reads
    message by message.
    """
    name = f"engram-scan-{uuid.uuid4().hex}"
    config = ConsumerConfig(name=name, filter_subject=subject, deliver_policy=DeliverPolicy.ALL,
                            ack_policy=AckPolicy.NONE, mem_storage=True, inactive_threshold=_LISTING_IDLE_S,
                            num_replicas=1)
    what = f"reading messages of {stream} on {subject!r}"
    with transient(what):
        info = await js.stream_info(stream)
    if info.config.retention == RetentionPolicy.WORK_QUEUE:
        return await _matching_one_by_one(js, stream, subject, match)
    pending = await _throwaway_consumer(js, stream, config, what)
    with transient(what):
        sub = await js.pull_subscribe_bind(consumer=name, stream=stream)
    found: list[int] = []
    try:
        while pending:
            try:
                batch = await _fetch(sub, min(pending, _LISTING_BATCH), what)
            except Timeout:  # the rest expired or was deleted meanwhile
                with transient(what):
                    pending = (await js.consumer_info(stream, name)).num_pending or 0
                continue
            for msg in batch:
                pending = msg.metadata.num_pending
                if match(msg.data or b""):
                    found.append(msg.metadata.sequence.stream)
    finally:
        await sub.unsubscribe()
        with contextlib.suppress(NatsError):
            await js.delete_consumer(stream, name)
    return found


async def _not_now_retried(what: str, call: Callable[[], Awaitable[T]]) -> T:
    """`call`, tried again after each of _SETUP_PAUSES_S while the cluster answers "not now" (busy, or not yet
    routing to a reader's consumer just created on another node).

    Raises:
        Unavailable, Timeout: still no answer after the last pause (Timeout at once: nothing came in time).
    """
    for pause in _SETUP_PAUSES_S:
        try:
            with transient(what):
                return await call()
        except Unavailable:
            log.info("%s: the cluster is not ready, trying again in %.1f s", what, pause)
            await asyncio.sleep(pause)
    with transient(what):
        return await call()


async def _throwaway_consumer(js: JetStreamContext, stream: str, config: ConsumerConfig, what: str) -> int:
    """Create a reader's consumer (one replica: it lives for one listing and holds nothing worth replicating) and
    say how many messages it has to deliver."""
    return (await _not_now_retried(what, lambda: js.add_consumer(stream, config))).num_pending or 0


async def _fetch(sub: JetStreamContext.PullSubscription, batch: int, what: str) -> list[Msg]:
    """The next batch of a reader's consumer (right after its creation a cluster may answer 503: no one there
    answers for it yet)."""
    return await _not_now_retried(what, lambda: sub.fetch(batch=batch, timeout=_LISTING_FETCH_S))


async def _matching_one_by_one(js: JetStreamContext, stream: str, subject: str,
                               match: Callable[[bytes], bool]) -> list[int]:
    found: list[int] = []
    seq = 1
    while True:
        try:
            msg = await js.get_msg(stream, seq=seq, subject=subject, next=True)
        except NotFoundError:
            return found
        assert msg.seq is not None
        if match(msg.data or b""):
            found.append(msg.seq)
        seq = msg.seq + 1


async def delete_matching(js: JetStreamContext, stream: str, subject: str, match: Callable[[bytes], bool]) -> int:
    """Erase (the server's secure erase) the messages `matching` finds; returns how many were still there."""
    deleted = 0
    for seq in await matching(js, stream, subject, match):
        with transient(f"erasing message {seq} of {stream}"), contextlib.suppress(NotFoundError):
            await js.delete_msg(stream, seq)  # NotFound: expired (or acknowledged from a work queue) meanwhile
            deleted += 1
    return deleted
