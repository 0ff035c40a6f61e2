"""Exporting spans by OTLP/HTTP when an endpoint is configured (ENGRAM_OTEL_ENDPOINT, or OpenTelemetry's own
OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); with neither, no provider is installed and no span
is recorded."""
import contextlib
import logging
from collections.abc import Iterator

from opentelemetry import trace

from shared.settings import Settings
from shared.tracing import spans

log = logging.getLogger("engram.tracing")
TRACES_PATH = "/v1/traces"


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector's base URL (`http://collector:4318` → `…/v1/traces`)."""
    return endpoint if endpoint.rstrip("/").endswith(TRACES_PATH) else endpoint.rstrip("/") + TRACES_PATH


@contextlib.contextmanager
def exporting(settings: Settings) -> Iterator[bool]:
    """Install a tracer provider that exports by OTLP for the block when configured; yields whether spans are
    recorded. A provider the process already installed (an application running engram in-process) is kept."""
    if spans.active() or not settings.otel_configured:
        yield spans.active()
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # Without ENGRAM_OTEL_ENDPOINT the exporter reads OpenTelemetry's standard variables itself.
    exporter = OTLPSpanExporter(endpoint=traces_url(settings.otel_endpoint) if settings.otel_endpoint else None)
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: settings.otel_service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))  # exports off the event loop, drops when backed up
    trace.set_tracer_provider(provider)
    log.info("tracing on: spans exported by OTLP/HTTP to %s",
             settings.otel_endpoint or "OTEL_EXPORTER_OTLP_ENDPOINT")
    try:
        yield True
    finally:
        provider.shutdown()  # sends what is still batched
