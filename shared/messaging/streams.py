"""JetStream streams engram owns, named and created in one place, and the listing of a key-value bucket's keys."""
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError
from nats.js.kv import KV_MARKER_REASON, KV_OP

from engram_client import subjects
from shared.errors import ConfigError
from shared.messaging.connection import transient

log = logging.getLogger("engram.streams")
_LISTING_BATCH, _LISTING_FETCH_S, _LISTING_IDLE_S = 1_000, 5.0, 60.0


def turns_stream(prefix: str) -> str:
    """Name of the stream carrying turns and flushes (`MEM_TURNS` for the default prefix)."""
    return f"{prefix.upper().replace('-', '_')}_TURNS"


def turns_subjects(prefix: str) -> list[str]:
    """Subjects the turns stream captures: turns and flushes of every tenant, in one order."""
    return [subjects.nats_wildcard(subjects.turns(prefix)), subjects.nats_wildcard(subjects.flush(prefix))]


def kv_stream(bucket: str) -> str:
    """The stream behind a key-value bucket (`KV_<bucket>`, as NATS names it)."""
    return f"KV_{bucket}"


def dlq_stream(prefix: str) -> str:
    """Name of the dead-letter stream."""
    return f"{prefix.upper().replace('-', '_')}_DLQ"


def dlq_subjects(prefix: str) -> list[str]:
    """Subjects the dead-letter stream captures."""
    return [subjects.nats_wildcard(subjects.dlq(prefix, service="*"))]


def consolidation_buckets(prefix: str) -> tuple[str, str]:
    """Names of the key-value buckets of tenant leases (keys expire) and of finished runs (`MEM_CONSOLIDATION_…`)."""
    base = f"{prefix.upper().replace('-', '_')}_CONSOLIDATION"
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
TURNS_DUPLICATE_WINDOW_S = 120.0
DLQ_MAX_AGE_S = 14 * 24 * 3600.0
DEFAULT_TURN_RETENTION_S = 30 * 24 * 3600.0


async def ensure(js: JetStreamContext, prefix: str, turn_retention_s: float | None = DEFAULT_TURN_RETENTION_S,
                 num_replicas: int = 1) -> None:
    """Create the turns and dead-letter streams, or bring an existing stream's subjects and age limit up to date.

    The turns stream keeps every turn for `turn_retention_s` (None: for ever) after it is in memory, so that
    `engram rebuild` can derive the memory again; forget erases a person's turns from it. A stream made by an older
    engram as a work queue (acked turns gone) cannot change its retention: it is left as it is, with a warning.
    An existing stream keeps the replicas it has (an operator may have changed them).
    """
    wanted = [
        StreamConfig(name=turns_stream(prefix), subjects=turns_subjects(prefix), storage=StorageType.FILE,
                     retention=RetentionPolicy.LIMITS, max_age=turn_retention_s or 0.0,
                     duplicate_window=TURNS_DUPLICATE_WINDOW_S, num_replicas=num_replicas,
                     description="engram: chat turns and flushes, ordered per tenant, kept for rebuilds"),
        StreamConfig(name=dlq_stream(prefix), subjects=dlq_subjects(prefix), storage=StorageType.FILE,
                     retention=RetentionPolicy.LIMITS, max_age=DLQ_MAX_AGE_S, num_replicas=num_replicas,
                     description="engram: messages that could not be processed, reason in headers"),
    ]
    for config in wanted:
        assert config.name is not None
        try:
            info = await js.stream_info(config.name)
        except NotFoundError:
            await js.add_stream(config)
            continue
        if info.config.retention != config.retention:
            log.warning("stream %s is a %s stream: it keeps no turns for `engram rebuild`; see the README's "
                        "upgrade notes to recreate it", config.name, info.config.retention)
            config.retention, config.max_age = info.config.retention, info.config.max_age
        if sorted(info.config.subjects or []) != sorted(config.subjects or []) or \
                (info.config.max_age or 0.0) != (config.max_age or 0.0):
            config.num_replicas = info.config.num_replicas  # an operator may have raised it: keep it
            await js.update_stream(config)


async def retains_turns(js: JetStreamContext, prefix: str) -> bool:
    """Whether the turns stream keeps turns after they are acknowledged (a limits stream, not a work queue)."""
    info = await js.stream_info(turns_stream(prefix))
    return info.config.retention == RetentionPolicy.LIMITS


def ingestor_consumer(prefix: str, ack_wait_s: float) -> ConsumerConfig:
    """The one durable consumer all ingestor replicas share, over turns and flushes.

    Deliveries are unlimited: engram's own settle decides when a failing message is dead-lettered, and a turn
    held back by back-pressure must wait as long as it takes rather than be dropped by the server.
    """
    return ConsumerConfig(durable_name=INGESTOR_DURABLE, ack_policy=AckPolicy.EXPLICIT,
                          deliver_policy=DeliverPolicy.ALL, filter_subjects=turns_subjects(prefix),
                          ack_wait=ack_wait_s, max_deliver=-1, max_ack_pending=10_000)


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
                            inactive_threshold=_LISTING_IDLE_S)
    with transient(f"listing keys of {pattern!r}"):
        pending = (await js.add_consumer(stream, config)).num_pending
        sub = await js.pull_subscribe_bind(consumer=name, stream=stream)
        try:
            while pending:
                for msg in await sub.fetch(batch=min(pending, _LISTING_BATCH), timeout=_LISTING_FETCH_S):
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
                            ack_policy=AckPolicy.NONE, mem_storage=True, inactive_threshold=_LISTING_IDLE_S)
    with transient(f"reading messages of {stream} on {subject!r}"):
        info = await js.stream_info(stream)
        if info.config.retention == RetentionPolicy.WORK_QUEUE:
            return await _matching_one_by_one(js, stream, subject, match)
        pending = (await js.add_consumer(stream, config)).num_pending
        sub = await js.pull_subscribe_bind(consumer=name, stream=stream)
    found: list[int] = []
    try:
        while pending:
            with transient(f"reading messages of {stream} on {subject!r}"):
                try:
                    batch = await sub.fetch(batch=min(pending, _LISTING_BATCH), timeout=_LISTING_FETCH_S)
                except (NatsTimeoutError, TimeoutError):  # the rest expired or was deleted meanwhile
                    pending = (await js.consumer_info(stream, name)).num_pending
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
