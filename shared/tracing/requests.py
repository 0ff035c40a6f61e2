"""Spans for the request-reply handlers: FastStream's NATS telemetry middleware, added only while tracing is on (it
continues the requester's trace from the request's `traceparent` header, and makes its `process` span current for the
handler, so engram's stage spans are its children)."""
from faststream import BaseMiddleware
from faststream.nats.opentelemetry import NatsTelemetryMiddleware

from shared.tracing import spans


def middlewares() -> list[NatsTelemetryMiddleware | type[BaseMiddleware]]:
    """FastStream's telemetry middleware when spans are recorded, else none (tracing off costs nothing)."""
    # Its messaging metrics stay off: Prometheus has engram's own, and no meter provider is installed anyway.
    return [NatsTelemetryMiddleware(include_messages_counters=False)] if spans.active() else []
