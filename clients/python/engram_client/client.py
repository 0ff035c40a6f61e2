"""MemoryClient: the async SDK a chat product or service uses to talk to engram over NATS."""
import asyncio
import contextlib
import itertools
import json
import logging
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO, TypeVar

from nats.aio.client import Client
from nats.aio.subscription import Subscription
from nats.errors import ConnectionClosedError, NoRespondersError, OutboundBufferLimitError
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import APIError, NoStreamResponseError
from pydantic import BaseModel

from engram_client import connection, portable, subjects, tracing
from engram_client.contract import (
    ConsolidateRequest,
    ConsolidationJob,
    ConsolidationSummary,
    EntriesRequest,
    EntriesResponse,
    Event,
    EventKind,
    ExportHeader,
    ExportPage,
    ExportRequest,
    Flush,
    Forget,
    ForgetResult,
    ImportRequest,
    ImportResult,
    RebuildReport,
    RebuildRequest,
    RecallRequest,
    RecallResponse,
    Reply,
    Turn,
    parse_event,
    validate_tenant,
)
from engram_client.errors import (
    RETRY_AFTER_HEADER,
    EngramError,
    Forbidden,
    InvalidRequest,
    Timeout,
    Unavailable,
    from_code,
)
from engram_client.security import ANONYMOUS, NatsSecurity

R = TypeVar("R", bound=Reply)
log = logging.getLogger("engram.client")
MAX_RETRY_WAIT_S = 1.0  # the longest wait between two tries of a request engram asked to retry
PUBLISH_TRIES = 3  # how often a turn is sent (same de-duplication id) while its acknowledgement times out
DEEP_TIMEOUT_S = 20.0   # a deep recall's client timeout at least (engram's own deadlines are 8 + 5 s by default)


def _refused(subject: str, exc: APIError) -> EngramError:
    """A publish the stream (or engram, making the tenant's stream) refused, as the wire's error: a message past the
    size limit is `invalid_request`, an unregistered tenant `forbidden`, a full storage quota (`maximum bytes
    exceeded`) and anything else `unavailable`, each with the server's own words."""
    reason = f"{subject} refused the message: {exc.description or type(exc).__name__}"
    if exc.code == 403:
        return Forbidden(reason)
    if exc.code == 400:
        return InvalidRequest(reason)
    return Unavailable(reason)


class EventStream:
    """engram's events about one tenant, from the moment the stream was opened: `async for event in stream`.

    Core NATS, at least once: de-duplicate on `event_id`; events published while the client is disconnected are not
    replayed. Close it (or use `async with`) to stop the subscription.
    """

    def __init__(self, subscription: Subscription) -> None:
        self._subscription = subscription
        self._messages = subscription.messages

    def __aiter__(self) -> "EventStream":
        return self

    async def __anext__(self) -> Event:
        while True:
            msg = await self._messages.__anext__()  # StopAsyncIteration once closed
            event = parse_event(msg.subject, msg.data)
            if event is not None:
                return event

    async def close(self) -> None:
        """Stop receiving events."""
        with contextlib.suppress(ConnectionClosedError):
            await self._subscription.unsubscribe()

    async def __aenter__(self) -> "EventStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class MemoryClient:
    """Publish turns, flush conversations, recall memories and inspect entries, for one tenant."""

    def __init__(self, nc: Client, tenant: str, prefix: str = "mem", timeout_s: float = 10.0) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self.tenant = validate_tenant(tenant)
        self._prefix = prefix
        self._timeout_s = timeout_s

    @classmethod
    async def connect(cls, url: str, tenant: str, prefix: str = "mem", timeout_s: float = 10.0,
                      first_connect_timeout_s: float = connection.FIRST_CONNECT_TIMEOUT_S,
                      pending_bytes: int = connection.PENDING_BYTES,
                      security: NatsSecurity = ANONYMOUS) -> "MemoryClient":
        """Connect to the NATS server engram listens on.

        The first connect is tried for `first_connect_timeout_s`, then fails with Unavailable. Once connected, the
        client reconnects for as long as it is open (backing off to a few seconds between attempts), so a NATS
        restart or outage never closes it; meanwhile a publish or request fails with Unavailable or Timeout, and
        at most `pending_bytes` of outgoing data are buffered. `security` names the identity, TLS and inbox prefix
        (a product whose NATS user may subscribe only to `_INBOX_<tenant>.>` connects with that inbox prefix).
        """
        validate_tenant(tenant)
        nc = await connection.connect(url, f"engram-client-{tenant}", quiet=True, pending_bytes=pending_bytes,
                                      first_connect_timeout_s=first_connect_timeout_s, security=security)
        return cls(nc, tenant, prefix, timeout_s)

    async def close(self) -> None:
        """Flush pending publishes and disconnect. While NATS is away there is nothing to flush to: what the client
        buffered is dropped (those publishes were never acknowledged) and it closes without raising."""
        if self._nc.is_connected:
            try:
                await self._nc.drain()
                return
            except (NatsError, OSError) as exc:  # the server went away while draining
                log.debug("draining the NATS connection: %s", exc)
        await connection.close(self._nc)

    async def __aenter__(self) -> "MemoryClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _publish(self, subject: str, payload: bytes, headers: dict[str, str] | None = None) -> int:
        """Publish and return the stream's sequence. A message with a de-duplication id whose acknowledgement times
        out while NATS is connected is sent again, up to PUBLISH_TRIES in all and only while the stream still knows
        the id (TURNS_DUPLICATE_WINDOW_S from the first send), so it is stored once whichever try arrives (a
        tenant's first turn waits while engram makes its stream, which can outlast a timeout on a loaded cluster);
        the publish's span notes each try sent again. A flush has no such id and is sent once."""
        headers = dict(headers or {})
        tries = PUBLISH_TRIES if "Nats-Msg-Id" in headers else 1
        first = time.monotonic()
        with tracing.outgoing("publish", subject, headers):
            for attempt in range(1, tries + 1):
                try:
                    return await self._publish_once(subject, payload, headers or None)
                except Timeout as exc:
                    last = attempt == tries or \
                        time.monotonic() - first + self._timeout_s >= subjects.TURNS_DUPLICATE_WINDOW_S
                    if last and attempt == 1:
                        raise
                    if last:
                        raise Timeout(f"publishing to {subject} timed out ({attempt} tries of {self._timeout_s:g} s)") \
                            from exc
                    log.info("publishing to %s timed out (try %d of %d); sending it again", subject, attempt, tries)
                    tracing.retried(attempt, "timeout")
        raise AssertionError("unreachable")

    async def _publish_once(self, subject: str, payload: bytes, headers: dict[str, str] | None) -> int:
        try:
            ack = await self._js.publish(subject, payload, headers=headers, timeout=self._timeout_s)
        except (NoRespondersError, NoStreamResponseError) as exc:
            raise Unavailable(f"no JetStream stream takes {subject}; is engram's ingestor running?") from exc
        except NatsTimeout as exc:
            if not self._nc.is_connected:  # NATS is away: nothing acknowledged the turn; send it again later
                raise Unavailable(f"publishing to {subject}: NATS is unreachable (reconnecting); the turn was not "
                                  f"acknowledged within {self._timeout_s:g} s, send it again") from exc
            raise Timeout(f"publishing to {subject} timed out") from exc
        except (OutboundBufferLimitError, ConnectionClosedError) as exc:
            raise Unavailable(f"cannot publish to {subject} now: {type(exc).__name__}") from exc
        except APIError as exc:  # the stream (or engram, making it) refused: past a quota, a limit, unregistered
            raise _refused(subject, exc) from exc
        return int(ack.seq)

    async def publish_turn(self, turn: Turn) -> int:
        """Publish a turn at least once (deduplicated by `<tenant>:<conversation>:<turn>`); returns its sequence."""
        return await self._publish(subjects.turns(self._prefix, self.tenant), turn.model_dump_json().encode(),
                                   headers={"Nats-Msg-Id": turn.msg_id(self.tenant)})

    async def publish_turns(self, turns: Sequence[Turn]) -> list[int]:
        """Publish many turns in order; returns their sequences."""
        return [await self.publish_turn(t) for t in turns]

    async def flush(self, conversation_id: str) -> int:
        """Close the conversation's open window (ordered after the turns published before it)."""
        return await self._publish(subjects.flush(self._prefix, self.tenant),
                                   Flush(conversation_id=conversation_id).model_dump_json().encode())

    async def _request(self, subject: str, request: BaseModel, reply_type: type[R],
                       timeout_s: float | None = None) -> R:
        """One request and its reply. When engram answers with a retry hint (the tenant has its share of the
        workers in flight: RETRY_AFTER_HEADER), ask again after that long, doubling each time up to
        MAX_RETRY_WAIT_S, with jitter, for as long as the timeout leaves; then raise the refusal."""
        headers: dict[str, str] = {}
        with tracing.outgoing("request", subject, headers):
            return await self._request_until(subject, request, reply_type, timeout_s or self._timeout_s,
                                             headers or None)

    async def _request_until(self, subject: str, request: BaseModel, reply_type: type[R], timeout_s: float,
                             headers: dict[str, str] | None) -> R:
        deadline = time.monotonic() + timeout_s
        payload = request.model_dump_json(exclude_none=True).encode()
        for attempt in itertools.count():
            try:
                msg = await self._nc.request(subject, payload, timeout=max(0.001, deadline - time.monotonic()),
                                             headers=headers)
            except NoRespondersError as exc:
                raise Unavailable(f"nobody answers {subject}; is engram running?") from exc
            except NatsTimeout as exc:
                raise Timeout(f"{subject} did not answer within {timeout_s}s") from exc
            except (OutboundBufferLimitError, ConnectionClosedError) as exc:
                raise Unavailable(f"cannot send to {subject} now: {type(exc).__name__}") from exc
            reply = reply_type.model_validate_json(msg.data)
            if reply.error is None:
                return reply
            hint = (msg.headers or {}).get(RETRY_AFTER_HEADER)
            if hint is not None and hint.isdigit():
                first_s = max(1, int(hint)) / 1000
                wait = min(MAX_RETRY_WAIT_S, first_s * 2 ** min(attempt, 16)) * random.uniform(0.5, 1.5)
                if time.monotonic() + wait < deadline:
                    await asyncio.sleep(wait)
                    continue
            raise from_code(reply.error.code, reply.error.message)
        raise AssertionError("unreachable")

    async def recall(self, query: str | RecallRequest, **fields: Any) -> RecallResponse:
        """Memories relevant to `query` (a string plus RecallRequest fields, or a whole RecallRequest)."""
        request = query if isinstance(query, RecallRequest) else RecallRequest(query=query, **fields)
        # A deep recall may take engram's deep and recall deadlines together (13 s by default) to answer.
        timeout_s = max(self._timeout_s, DEEP_TIMEOUT_S) if request.mode == "deep" else None
        return await self._request(subjects.recall(self._prefix, self.tenant), request, RecallResponse, timeout_s)

    async def entries(self, request: EntriesRequest | None = None, **fields: Any) -> EntriesResponse:
        """List, get or trace stored entries (admin)."""
        return await self._request(subjects.entries(self._prefix, self.tenant),
                                   request or EntriesRequest(**fields), EntriesResponse)

    async def forget(self, *, user_id: str | None = None, conversation_id: str | None = None,
                     entry_ids: list[str] | None = None) -> ForgetResult:
        """Delete everything engram holds of one user, one conversation or these entries, everywhere (entries of
        every kind, working memory, turns still queued, dead letters). Returns the receipt: what was deleted in
        each place, and whether a check afterwards found nothing left (`verified`)."""
        request = Forget(user_id=user_id, conversation_id=conversation_id, entry_ids=entry_ids)
        return await self._request(subjects.forget(self._prefix, self.tenant), request, ForgetResult)

    async def consolidate(self, *, user_id: str | None = None, jobs: list[ConsolidationJob] | None = None,
                          timeout_s: float = 120.0) -> ConsolidationSummary:
        """Run the consolidation jobs (all, or `jobs`) for the tenant or one user now, and say what they changed.
        A run takes a while on a big tenant, hence its own timeout."""
        request = ConsolidateRequest(user_id=user_id, jobs=jobs or [])
        return await self._request(subjects.consolidate(self._prefix, self.tenant), request, ConsolidationSummary,
                                   timeout_s)

    @property
    def max_payload(self) -> int:
        """The largest message the NATS server takes (its max_payload), in bytes."""
        return int(self._nc.max_payload)

    async def export_page(self, request: ExportRequest) -> ExportPage:
        """One page of an export (see export_to, which reads them all)."""
        return await self._request(subjects.export(self._prefix, self.tenant), request, ExportPage)

    async def export_to(self, out: TextIO, *, user_id: str | None = None,
                        on_progress: portable.OnProgress | None = None) -> ExportHeader:
        """Write everything engram holds about the tenant (or one user) to `out` as a JSON Lines export file: a header,
        every entry of every kind with its history and sources, and the turns still in working memory (no vectors).
        Returns the header."""
        return await portable.export_to(self, out, user_id=user_id, on_progress=on_progress)

    async def import_batch(self, request: ImportRequest, timeout_s: float = 120.0) -> ImportResult:
        """Import one batch of an export file's lines (see import_from). Operators only: a tenant's own NATS account
        cannot reach the import subject."""
        return await self._request(subjects.import_(self._prefix, self.tenant), request, ImportResult, timeout_s)

    async def import_from(self, path: Path, *, map_tenant: bool = False,
                          on_progress: portable.OnProgress | None = None) -> ImportResult:
        """Load an export file into this tenant, every line checked first; entries keep their ids and are embedded by
        the receiving engram, working-memory turns go to working memory, and a second import changes nothing. A file
        of another tenant is refused unless `map_tenant`."""
        return await portable.import_from(self, path, map_tenant=map_tenant, on_progress=on_progress)

    async def rebuild(self, into: str, *, window_turns: int | None = None,
                      timeout_s: float = 3600.0) -> RebuildReport:
        """Operators only (every tenant's memory): derive the long-term memory again from the retained turns into
        build `into`, then switch to it; the reply comes when the switch is done."""
        return await self._request(subjects.rebuild(self._prefix), RebuildRequest(into=into, window_turns=window_turns),
                                   RebuildReport, timeout_s)

    async def events(self, kind: EventKind | None = None) -> EventStream:
        """Subscribe to engram's events about this tenant (all kinds, or `kind`): entry_created, entries_merged,
        entry_superseded, entries_forgotten. The subscription is live when this returns."""
        subscription = await self._nc.subscribe(subjects.events(self._prefix, self.tenant, kind))
        return EventStream(subscription)

    async def raw_request(self, kind: str, payload: bytes) -> dict[str, Any]:
        """Send raw bytes to `<prefix>.<tenant>.<kind>` and return the decoded reply (for debugging and tests)."""
        msg = await self._nc.request(f"{self._prefix}.{self.tenant}.{kind}", payload, timeout=self._timeout_s)
        result: dict[str, Any] = json.loads(msg.data)
        return result
