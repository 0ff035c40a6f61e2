"""engram's spans: recorded only while a real tracer provider is installed (by export.py, or by the process that
runs engram in-process); otherwise every helper here returns at once and nothing is recorded.

The provider is looked up on every span rather than once, so a provider installed after import is used.
"""
import contextlib
from collections.abc import Iterator, Mapping, Sequence

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind
from opentelemetry.util.types import AttributeValue

TRACER_NAME = "engram"
Attributes = Mapping[str, AttributeValue]


def active() -> bool:
    """True when spans are recorded: a tracer provider other than OpenTelemetry's default proxy or no-op is set."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def incoming(headers: Mapping[str, str] | None) -> otel_context.Context | None:
    """The W3C trace context a message carries in its headers (`traceparent`), or None when it carries none (or
    tracing is off: then the headers are not even read)."""
    if not headers or not active():
        return None
    extracted = propagate.extract(dict(headers))
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None


def current() -> SpanContext | None:
    """The context of the span in progress, or None when there is none (or tracing is off)."""
    found = trace.get_current_span().get_span_context()
    return found if found.is_valid else None


@contextlib.contextmanager
def span(name: str, *, parent: otel_context.Context | SpanContext | None = None,
         links: Sequence[SpanContext] = (), kind: SpanKind = SpanKind.INTERNAL,
         attributes: Attributes | None = None) -> Iterator[Span | None]:
    """A span (made current) for the block, or None with tracing off.

    Args:
        parent: the parent: a context extracted from headers, or a span context remembered from earlier (a window's
            seal); None: the span in progress, if any.
    """
    if not active():
        yield None
        return
    if isinstance(parent, SpanContext):
        parent = trace.set_span_in_context(trace.NonRecordingSpan(parent))
    tracer = trace.get_tracer(TRACER_NAME)
    with tracer.start_as_current_span(name, context=parent, kind=kind, attributes=attributes,
                                      links=[Link(c) for c in links if c.is_valid]) as opened:
        yield opened


def start(name: str, attributes: Attributes | None = None) -> Span | None:
    """A child of the span in progress that the caller ends (`end`): for work run as a task meanwhile (the query's
    embedding runs while the query is planned). None with tracing off."""
    if not active():
        return None
    return trace.get_tracer(TRACER_NAME).start_span(name, attributes=attributes)


def end(opened: Span | None) -> None:
    """End a span from `start` (None: nothing to do)."""
    if opened is not None:
        opened.end()
