"""The only code that acks, naks or dead-letters JetStream messages by hand; handlers never try/except."""
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from opentelemetry.trace import SpanKind

from engram_client import subjects
from engram_client.contract import ErrorBody, Turn
from engram_client.contract.base import RESERVED_TENANT
from engram_client.contract.failures import code_of, error_body
from engram_client.errors import EngramError
from shared.errors import Busy, SetAside
from shared.runtime import logs, metrics
from shared.tracing import spans

log = logging.getLogger("engram.deadletter")

HEADER_CODE = "Engram-Error-Code"
HEADER_REASON = "Engram-Error-Reason"
HEADER_SUBJECT = "Engram-Source-Subject"
HEADER_DELIVERIES = "Engram-Deliveries"
HEADER_SERVICE = "Engram-Service"
HEADER_SEQUENCE = "Engram-Source-Sequence"
HEADER_TRUNCATED = "Engram-Truncated-From"  # the body's original size, when only its start fits in a dead letter
MAX_SUBJECT_CHARS, MAX_TENANT_CHARS = 256, 64
DEFAULT_MAX_PAYLOAD, HEADROOM_BYTES = 1024 * 1024, 4096
MAX_RETRY_DELAY_S = 30.0


class Settle(enum.Enum):
    """What to do with a message whose handling failed."""

    RETRY = "retry"
    DEAD_LETTER = "dead_letter"


def settle(exc: BaseException, deliveries: int, max_deliver: int, *, accepted: bool = False) -> Settle:
    """Retry what may succeed later, up to max_deliver; wait out back-pressure however long; dead-letter the rest.

    The one failure policy of engram's asynchronous work: JetStream messages, and the windows the closer writes.

    Args:
        deliveries: attempts so far, this one included.
        accepted: the work was accepted already and waits in working memory, not in a stream (a sealed window):
            a dependency that is down is waited out however long, like back-pressure (its turns were valid, and a
            long outage must not throw them away), and any other failure is retried up to max_deliver before the
            turns are dead-lettered (valid turns may have met a passing fault).
    """
    if isinstance(exc, Busy):
        return Settle.RETRY  # a valid message that must wait for engram to catch up, never thrown away
    retryable = isinstance(exc, EngramError) and exc.retryable
    if accepted:
        return Settle.RETRY if retryable or deliveries < max_deliver else Settle.DEAD_LETTER
    if retryable and deliveries < max_deliver:
        return Settle.RETRY
    return Settle.DEAD_LETTER


def retry_delay_s(deliveries: int) -> float:
    """Backoff before the next attempt: 1, 2, 4 ... seconds, at most 30 (a nak's delay, a window's wait)."""
    return float(min(MAX_RETRY_DELAY_S, 2 ** min(max(0, deliveries - 1), 16)))


Handler = Callable[[str, str, bytes, int], Awaitable[None]]  # (tenant, kind, body, stream sequence)


class AttemptCounter(Protocol):
    """Attempts begun and never ended, kept where every replica sees them (shared/working_memory/attempts.py)."""

    async def begin(self, key: str) -> int:
        """Count an attempt beginning; how many have begun without ending, this one included."""

    async def end(self, key: str) -> None:
        """The attempt ended (however)."""


def message_key(raw: Msg) -> str:
    """The key of a stream message's attempts: its stream and sequence."""
    stream = raw.metadata.stream if raw.metadata else "?"
    return f"m.{stream}.{raw.metadata.sequence.stream if raw.metadata else 0}"


class Settler:
    """Runs a handler over a fetched batch in stream order, then acks, naks or dead-letters each message.

    Nothing a message does can end the loop that calls this: when even settling fails (the connection dropped, the
    dead-letter stream is missing), the message is left unacked and JetStream delivers it again after ack_wait.
    """

    def __init__(self, service: str, prefix: str, max_deliver: int, js: JetStreamContext, client_id: str = "",
                 attempts: AttemptCounter | None = None) -> None:
        """
        Args:
            client_id: this replica's NATS connection name, on its spans (`messaging.client.id`).
            attempts: where a redelivered message's unfinished attempts are counted; one whose handling was cut short
                (the process died or hung) more than `max_deliver` times is dead-lettered without being handled.
        """
        self._service = service
        self._client_id = client_id
        self._prefix = prefix
        self._max_deliver = max_deliver
        self._js = js
        self._attempts = attempts

    async def run(self, messages: list[Msg], handle: Handler) -> None:
        """Handle each message of the batch in stream order.

        A redelivered message may arrive after newer ones; windows are cut by stream sequence all the same.
        """
        for raw in sorted(messages, key=lambda m: m.metadata.sequence.stream if m.metadata else 0):
            started = time.perf_counter()
            tenant, kind = subjects.parse(raw.subject)
            # Delivered before and not settled then: this attempt is counted, so that one that kills or hangs the
            # process every time is caught (the count of a settled attempt is gone by its next delivery).
            counter = self._attempts if raw.metadata and raw.metadata.num_delivered > 1 else None
            attempt = message_key(raw)
            try:
                if counter is not None and await counter.begin(attempt) > self._max_deliver:
                    metrics.poison_total.labels("message").inc()
                    outcome = await self._dead_letter(raw, SetAside(
                        f"handling this message began {raw.metadata.num_delivered if raw.metadata else 0} times "
                        "and was cut short each time (the ingestor died or hung): it is set aside, not handled "
                        "again"))
                    await counter.end(attempt)
                    logs.handled(log, service=self._service, tenant=tenant, subject=raw.subject, outcome=outcome,
                                 started=started)
                    continue
                try:
                    seq = raw.metadata.sequence.stream if raw.metadata else 0
                    # A child of the publisher's span when the message carries its trace context (`traceparent`).
                    with spans.span(f"engram.{kind or 'message'} accept", parent=spans.incoming(raw.headers),
                                    kind=SpanKind.CONSUMER, attributes={
                                        "messaging.system": "nats", "messaging.destination.name": raw.subject,
                                        "messaging.operation.type": "process", "engram.tenant": tenant,
                                        "engram.stream_seq": seq, "engram.service": self._service,
                                        "messaging.client.id": self._client_id}):
                        await handle(tenant, kind, raw.data, seq)
                except Exception as exc:  # every failure of a handler is settled here, and only here
                    outcome = await self._settle(raw, exc)
                else:
                    await raw.ack()
                    outcome = "ok"
                if counter is not None:
                    await counter.end(attempt)
            except Exception as exc:  # acking, nak'ing or dead-lettering failed; the message comes back later
                metrics.unsettled_total.labels(self._service).inc()
                log.warning("could not settle %s (%s: %s); JetStream redelivers it after ack_wait", raw.subject,
                            type(exc).__name__, exc)
                outcome = "unsettled"
            logs.handled(log, service=self._service, tenant=tenant, subject=raw.subject, outcome=outcome,
                         started=started)

    async def _settle(self, raw: Msg, exc: Exception) -> str:
        deliveries = int(raw.metadata.num_delivered) if raw.metadata else 1
        code = code_of(exc)
        if settle(exc, deliveries, self._max_deliver) is Settle.RETRY:
            metrics.retried_total.labels(self._service, code).inc()
            log.warning("retrying %s (delivery %d): %s", raw.subject, deliveries, exc)
            await raw.nak(delay=retry_delay_s(deliveries))
            return f"retry_{code}"
        if code == "internal":
            log.error("dead-lettering %s after an internal error", raw.subject, exc_info=exc)
        return await self._dead_letter(raw, exc)

    async def _dead_letter(self, raw: Msg, exc: Exception) -> str:
        deliveries = int(raw.metadata.num_delivered) if raw.metadata else 1
        body = error_body(exc)
        headers = {
            HEADER_CODE: body.code, HEADER_REASON: body.message.replace("\n", " ")[:1000],
            HEADER_SUBJECT: raw.subject[:MAX_SUBJECT_CHARS], HEADER_DELIVERIES: str(deliveries),
            HEADER_SERVICE: self._service, HEADER_SEQUENCE: str(raw.metadata.sequence.stream) if raw.metadata else "",
        }
        tenant, _ = subjects.parse(raw.subject)
        if tenant == RESERVED_TENANT or len(tenant) > MAX_TENANT_CHARS:  # `mem.dlq.…` is the dead letters' own;
            tenant = "unknown"                                           # a longer token is no tenant
        data = raw.data or b""
        room = int(getattr(getattr(raw, "_client", None), "max_payload", 0) or DEFAULT_MAX_PAYLOAD) - HEADROOM_BYTES
        if len(data) > room:  # the headers would push it past max_payload, and the server would drop the connection
            headers[HEADER_TRUNCATED] = str(len(data))
            data = data[:max(0, room)]
        # Published before the ack: a crash in between redelivers the message, never loses it.
        await self._js.publish(subjects.dlq(self._prefix, tenant, self._service), data, headers=headers)
        await raw.ack()
        metrics.dead_lettered_total.labels(self._service, body.code).inc()
        log.warning("dead-lettered %s: %s %s", raw.subject, body.code, body.message)
        return f"dead_letter_{body.code}"


TurnDeadLetter = Callable[[str, Turn, ErrorBody, int], Awaitable[None]]  # (tenant, turn, why, attempts)


def turn_dead_letters(js: JetStreamContext, prefix: str, service: str) -> TurnDeadLetter:
    """A function that dead-letters one turn of a window engram could not write, with the reason in its headers.

    The body is the turn as it was published, so it can be published again once the cause is fixed.
    """

    async def send(tenant: str, turn: Turn, why: ErrorBody, attempts: int) -> None:
        headers = {HEADER_CODE: why.code, HEADER_REASON: why.message.replace("\n", " ")[:1000],
                   HEADER_SUBJECT: subjects.turns(prefix, tenant), HEADER_DELIVERIES: str(attempts),
                   HEADER_SERVICE: service, HEADER_SEQUENCE: ""}
        await js.publish(subjects.dlq(prefix, tenant, service), turn.model_dump_json().encode(), headers=headers)
        metrics.dead_lettered_total.labels(service, why.code).inc()

    return send
