"""Request-reply: any failure becomes an `error{code, message}` reply, so callers never wait for a timeout; and engram
answers only on inboxes.

A request names the subject its answer goes to, and a service that answers `msg.reply` writes wherever that points:
a reply subject naming one of engram's key-value buckets (`$KV.…`), the JetStream API (`$JS.…`), a tenant's
subjects (`mem.…`) or engram's own (`_ENGRAM.…`) would make engram write its answer there. So a request whose reply
subject is not an inbox (`_INBOX.…`, `_INBOX_<tenant>.…`, or `_R_.…`, the reply NATS maps a request that crossed
from a product's account onto) is not handled at all: it is counted (`engram_replies_refused_total`) and logged.
"""
import logging
import re
import time
from typing import Any, TypeVar

from faststream import BaseMiddleware
from faststream.message import StreamMessage
from faststream.nats import NatsResponse
from pydantic import BaseModel

from engram_client import subjects
from engram_client.contract import Reply
from engram_client.contract.failures import error_body
from engram_client.errors import RETRY_AFTER_HEADER
from shared.errors import OverShare
from shared.runtime import logs, metrics
from shared.tenancy.limits import OverRate, RequestLimits

log = logging.getLogger("engram.replies")
M = TypeVar("M", bound=BaseModel)
_INBOX = re.compile(r"(?:_INBOX|_INBOX_[A-Za-z0-9_-]{1,64}|_R_)\.[A-Za-z0-9_-]{1,128}(?:\.[A-Za-z0-9_-]{1,128}){0,7}")


def answerable(reply: str) -> bool:
    """Whether engram may publish an answer on `reply`: an inbox, and nothing else."""
    return len(reply) <= 512 and _INBOX.fullmatch(reply) is not None


def refused(reply: str, service: str) -> None:
    """Count and log a request left unanswered because its reply subject is not an inbox."""
    metrics.replies_refused_total.labels(service).inc()
    log.warning("not answering a request whose reply subject %r is not an inbox", reply[:200])


def middleware(service: str, limits: RequestLimits | None = None) -> type[BaseMiddleware]:
    """A FastStream middleware that answers only inboxes, checks the tenant's request limits, turns exceptions into
    error replies and logs one line per request."""

    class ErrorReplies(BaseMiddleware):
        """Answers every failure with `error{code, message}`, counts and logs every request."""

        async def consume_scope(self, call_next: Any, msg: StreamMessage[Any]) -> Any:
            """Run the handler; whatever it raises becomes the reply."""
            subject = str(getattr(msg.raw_message, "subject", "?"))
            tenant, kind = subjects.parse(subject)
            if msg.reply_to and not answerable(msg.reply_to):
                refused(msg.reply_to, service)
                msg.reply_to = ""  # FastStream publishes no answer, and the handler never runs
                return None
            started = time.perf_counter()
            try:
                if limits is not None and kind:
                    limits.check(tenant, kind)
                result = await call_next(msg)
            except Exception as exc:  # the one place request-reply failures are caught
                body = error_body(exc)
                if body.code == "internal":
                    log.exception("internal error answering %s", subject, exc_info=exc)
                result = Reply(error=body)
                if isinstance(exc, OverShare | OverRate):  # the SDK asks again after this long
                    result = NatsResponse(encode(result), headers={
                        RETRY_AFTER_HEADER: str(round(exc.retry_after_s * 1000))})
            outcome = "ok"
            if isinstance(result, Reply) and result.error:
                outcome = result.error.code
            elif isinstance(result, NatsResponse):
                outcome = "unavailable"
            metrics.requests_total.labels(service, kind or "unknown", outcome).inc()
            logs.handled(log, service=service, tenant=tenant, subject=subject, outcome=outcome, started=started)
            return result

    return ErrorReplies


async def raw_body(msg: StreamMessage[Any]) -> bytes:
    """A subscriber's decoder that leaves the body as bytes: handlers parse it with pydantic themselves.

    FastStream's own decoder runs `json.loads` on every body first and lets RecursionError (nesting ~1,000 deep) and
    ValueError (an integer of over 4,300 digits) through, so a hostile body was answered `internal`; pydantic
    reports the same bodies as `invalid_request`.
    """
    body: bytes = msg.body
    return body


def parse(model: type[M], body: bytes) -> M:
    """A request body read exactly as its published schema says (strict JSON): `"300"` or `true` is no integer and
    `"true"` no boolean, so a product's type error is answered `invalid_request` instead of guessed at."""
    return model.model_validate_json(body, strict=True)


def encode(reply: Reply) -> bytes:
    """A reply as the bytes a handler returns: serialized once, by pydantic.

    Returning the model lets FastStream cast and encode it again: measured 0.14 ms more per request for a 28 KB
    recall reply, on a round trip of 0.8 ms.
    """
    return reply.model_dump_json().encode()


def tenant_of(msg: Any) -> str:
    """The tenant token of a request's subject (`<prefix>.<tenant>.<kind>`).

    Read here rather than through a FastStream `Path()` parameter, which measured 0.17 ms more per request.
    """
    return subjects.parse(str(msg.raw_message.subject))[0]
