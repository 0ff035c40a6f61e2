"""OpenTelemetry for the client, optional: with `engram-client[otel]` installed and a tracer provider set by the
product, each publish and request gets a span and carries its W3C trace context (`traceparent`) in NATS headers.

Without opentelemetry-api, or with no provider set (OpenTelemetry's default), nothing is recorded and no header is
added: the client needs only nats-py and pydantic.
"""
import contextlib
import functools
from collections.abc import Iterator
from types import ModuleType
from typing import Literal

TRACER_NAME = "engram_client"


@functools.cache
def _otel() -> tuple[ModuleType, ModuleType] | None:
    """opentelemetry's trace and propagate modules, imported on first use; None when not installed."""
    try:
        from opentelemetry import propagate, trace
    except ImportError:
        return None
    return trace, propagate


def active() -> bool:
    """True when a real tracer provider is installed (OpenTelemetry's default proxy and no-op record nothing)."""
    otel = _otel()
    if otel is None:
        return False
    trace = otel[0]
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


@contextlib.contextmanager
def outgoing(operation: Literal["publish", "request"], subject: str, headers: dict[str, str]) -> Iterator[None]:
    """A span around one publish or request to `subject`, its context injected into `headers` (changed in place).

    The span is `engram.<kind> <operation>`, kind being the subject's last token (`turns`, `flush`, `recall` ...): a
    name of bounded cardinality; the subject, which names the tenant, is an attribute.
    """
    if not active():
        yield
        return
    otel = _otel()
    assert otel is not None
    trace, propagate = otel
    span_kind = trace.SpanKind.PRODUCER if operation == "publish" else trace.SpanKind.CLIENT
    tracer = trace.get_tracer(TRACER_NAME)
    with tracer.start_as_current_span(f"engram.{subject.rsplit('.', 1)[-1]} {operation}", kind=span_kind, attributes={
            "messaging.system": "nats", "messaging.operation.type": "send",
            "messaging.destination.name": subject}):
        propagate.inject(headers)
        yield


def retried(attempt: int, reason: str) -> None:
    """Note on the current span (a publish's) that its message is sent again: the try that failed and why."""
    if not active():
        return
    otel = _otel()
    assert otel is not None
    otel[0].get_current_span().add_event("engram.retry", {"engram.attempt": attempt, "engram.reason": reason})
