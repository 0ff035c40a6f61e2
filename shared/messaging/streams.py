"""JetStream streams engram owns, named and created in one place."""
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from shared.messaging import subjects


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


INGESTOR_DURABLE = "ingestor"
TURNS_DUPLICATE_WINDOW_S = 120.0
DLQ_MAX_AGE_S = 14 * 24 * 3600.0


async def ensure(js: JetStreamContext, prefix: str) -> None:
    """Create the turns and dead-letter streams, or bring an existing stream's subjects up to date."""
    wanted = [
        StreamConfig(name=turns_stream(prefix), subjects=turns_subjects(prefix), storage=StorageType.FILE,
                     # A work queue drops a turn once acked: the stream holds only turns not yet in memory.
                     retention=RetentionPolicy.WORK_QUEUE, duplicate_window=TURNS_DUPLICATE_WINDOW_S,
                     description="engram: chat turns and flushes, ordered per tenant"),
        StreamConfig(name=dlq_stream(prefix), subjects=dlq_subjects(prefix), storage=StorageType.FILE,
                     retention=RetentionPolicy.LIMITS, max_age=DLQ_MAX_AGE_S,
                     description="engram: messages that could not be processed, reason in headers"),
    ]
    for config in wanted:
        assert config.name is not None
        try:
            info = await js.stream_info(config.name)
        except NotFoundError:
            await js.add_stream(config)
            continue
        if sorted(info.config.subjects or []) != sorted(config.subjects or []):
            await js.update_stream(config)


def ingestor_consumer(prefix: str, ack_wait_s: float) -> ConsumerConfig:
    """The one durable consumer all ingestor replicas share, over turns and flushes.

    Deliveries are unlimited: engram's own settle decides when a failing message is dead-lettered, and a turn
    held back by back-pressure must wait as long as it takes rather than be dropped by the server.
    """
    return ConsumerConfig(durable_name=INGESTOR_DURABLE, ack_policy=AckPolicy.EXPLICIT,
                          deliver_policy=DeliverPolicy.ALL, filter_subjects=turns_subjects(prefix),
                          ack_wait=ack_wait_s, max_deliver=-1, max_ack_pending=10_000)
