"""Tracing off by default costs nothing and changes no message; the OTLP export works when configured; the client
works without OpenTelemetry installed; a replica's memory of turn contexts is bounded."""
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.trace import SpanContext, TraceFlags
from opentelemetry.util._once import Once
from pydantic import ValidationError

from engram_client import tracing as client_tracing
from shared.settings import Settings
from shared.tracing import spans
from shared.tracing.export import exporting, traces_url
from shared.tracing.marks import Marks
from shared.tracing.requests import middlewares

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"


def _context(span_id: int) -> SpanContext:
    return SpanContext(trace_id=1, span_id=span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))


@pytest.fixture
def reset_provider() -> Iterator[None]:
    """Whatever provider the test installs is removed afterwards (OpenTelemetry sets it once per process; its own
    test utilities reset it the same way)."""
    yield
    provider = trace.get_tracer_provider()
    shutdown = getattr(provider, "shutdown", None)
    if shutdown is not None:
        shutdown()
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


def test_with_no_tracer_provider_nothing_is_recorded_and_no_header_is_added(tmp_path: Path) -> None:
    """OpenTelemetry's default (no provider installed): the client adds no `traceparent`, engram's spans are None,
    no FastStream middleware is added, nothing is remembered for windows, and exporting() installs nothing."""
    headers: dict[str, str] = {}
    with client_tracing.outgoing("publish", "mem.acme.turns", headers):
        pass
    assert headers == {} and not client_tracing.active() and not spans.active()
    with spans.span("engram.anything") as opened:
        assert opened is None
    assert spans.start("engram.anything") is None and middlewares("mem") == []
    assert spans.incoming({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}) is None
    marks = Marks()
    marks.accepted("acme", "c1", 1, [[1]])
    assert marks.turns("acme", "c1", [1]) == [] and marks.seal_of("acme", "c1", [1]) is None
    with exporting(Settings(data_dir=tmp_path)) as on:
        assert not on and not spans.active()


def test_the_client_works_without_opentelemetry_installed() -> None:
    """In a process where `opentelemetry` cannot be imported, engram_client imports, reports tracing inactive and
    publishes without headers (the `otel` extra is optional)."""
    code = ("import sys; sys.modules['opentelemetry'] = None\n"
            "from engram_client import MemoryClient, tracing\n"
            "h = {}\n"
            "with tracing.outgoing('request', 'mem.acme.recall', h): pass\n"
            "assert h == {} and not tracing.active()\n"
            "print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=CLIENT, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_marks_keep_the_newest_contexts_up_to_their_limit() -> None:
    """A replica remembers at most `limit` turn contexts (the oldest go first), and forgets a window's once written."""
    marks = Marks(limit=2)
    for seq in (1, 2, 3):
        marks.turn("acme", "c1", seq, _context(seq))
    assert [c.span_id for c in marks.turns("acme", "c1", [1, 2, 3])] == [2, 3]
    marks.sealed("acme", "c1", [2, 3], _context(9))
    marks.written("acme", "c1", [2, 3])
    assert marks.turns("acme", "c1", [2, 3]) == [] and marks.seal_of("acme", "c1", [2, 3]) is None


def test_the_otlp_endpoint_setting_is_checked_and_the_standard_variable_counts(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """ENGRAM_OTEL_ENDPOINT needs an http(s) scheme and gets the traces path; OTEL_EXPORTER_OTLP_ENDPOINT alone also
    turns export on."""
    with pytest.raises(ValidationError, match="ENGRAM_OTEL_ENDPOINT='collector:4318' has no http/https scheme"):
        Settings(data_dir=tmp_path, otel_endpoint="collector:4318")
    assert traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert traces_url("http://collector:4318/v1/traces") == "http://collector:4318/v1/traces"
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert not Settings(data_dir=tmp_path).otel_configured
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert Settings(data_dir=tmp_path).otel_configured


def test_spans_are_exported_by_otlp_http_when_an_endpoint_is_configured(tmp_path: Path,
                                                                        reset_provider: None) -> None:
    """With ENGRAM_OTEL_ENDPOINT set, exporting() installs a provider and, on exit, sends the spans to that collector
    (a local HTTP server reading the OTLP protobuf) under the configured service name."""
    received: list[tuple[str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        settings = Settings(data_dir=tmp_path, otel_endpoint=f"http://127.0.0.1:{server.server_port}",
                            otel_service_name="engram-test")
        with exporting(settings) as on:
            assert on and spans.active()
            with spans.span("engram.recall search"):
                pass
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
    assert [path for path, _ in received] == ["/v1/traces"]
    request = ExportTraceServiceRequest.FromString(received[0][1])
    [resource_spans] = request.resource_spans
    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"]
    names = [s.name for scope in resource_spans.scope_spans for s in scope.spans]
    assert service == "engram-test" and names == ["engram.recall search"]
