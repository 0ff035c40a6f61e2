"""Request-reply: any failure becomes an `error{code, message}` reply, so callers never wait for a timeout."""
import logging
import time
from typing import Any

from faststream import BaseMiddleware
from faststream.message import StreamMessage

from shared import metrics
from shared.contract import Reply
from shared.failures import error_body

log = logging.getLogger("engram.replies")


def middleware(service: str) -> type[BaseMiddleware]:
    """A FastStream middleware that turns exceptions into error replies and logs one line per request."""

    class ErrorReplies(BaseMiddleware):
        async def consume_scope(self, call_next: Any, msg: StreamMessage[Any]) -> Any:
            subject = str(getattr(msg.raw_message, "subject", "?"))
            kind = subject.rsplit(".", 1)[-1]
            started = time.perf_counter()
            try:
                result = await call_next(msg)
            except Exception as exc:  # the one place request-reply failures are caught
                body = error_body(exc)
                if body.code == "internal":
                    log.exception("internal error answering %s", subject, exc_info=exc)
                metrics.requests_total.labels(service, kind, body.code).inc()
                log.info("handled", extra={"service": service, "subject": subject, "outcome": body.code,
                                           "duration_ms": round((time.perf_counter() - started) * 1e3, 2)})
                return Reply(error=body)
            outcome = result.error.code if isinstance(result, Reply) and result.error else "ok"
            metrics.requests_total.labels(service, kind, outcome).inc()
            log.info("handled", extra={"service": service, "subject": subject, "outcome": outcome,
                                       "duration_ms": round((time.perf_counter() - started) * 1e3, 2)})
            return result

    return ErrorReplies
