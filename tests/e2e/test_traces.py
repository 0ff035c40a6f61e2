"""Traces: a turn and a recall each make one trace across the client, NATS (headers) and the services."""
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from engram_client import MemoryClient
from services.stack import running
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.stacks import fast_settings
from tests.support.turns import conversation


def _one(found: list[ReadableSpan], name: str) -> ReadableSpan:
    named = [s for s in found if s.name == name]
    assert len(named) == 1, f"{len(named)} spans named {name!r} among {sorted(s.name for s in found)}"
    return named[0]


def _parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _tree(found: list[ReadableSpan], trace_id: int) -> str:
    """The spans of one trace, indented under their parents, in start order (printed for the README)."""
    mine = sorted((s for s in found if s.context is not None and s.context.trace_id == trace_id),
                  key=lambda s: s.start_time or 0)
    ids = {s.context.span_id for s in mine if s.context is not None}
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for s in mine:
            if (_parent_of(s) if _parent_of(s) in ids else None) == parent:
                links = f"  (links: {len(s.links)})" if s.links else ""
                lines.append(f"{'  ' * depth}{s.name} [{s.kind.name.lower()}]{links}")
                walk(s.context.span_id if s.context is not None else None, depth + 1)

    walk(None, 0)
    return "\n".join(lines)


async def test_a_turn_and_a_recall_are_traced_from_the_client_through_nats(
        spans: InMemorySpanExporter, tmp_path: Path) -> None:
    """With a tracer provider installed, the client's publish span is the parent of the ingestor's accept span (its
    `traceparent` crossed JetStream), the window the turn sealed links to each of its turns, and the window's
    compress, embed and upsert spans belong to that turn's trace; a recall's stage spans are children of the
    retriever's handler span (FastStream's middleware), itself a child of the client's request span; the
    consolidator's handler continues a consolidate request's trace likewise."""
    settings = fast_settings(tmp_path).model_copy(update={"window_turns": 2})
    async with running(settings) as stack, await MemoryClient.connect(stack.nats_url, unique("tenant")) as client:
        first, second = conversation([("Ana", "I adopted a cat called Miso in March."),
                                      ("Ana", "Miso sleeps on the piano every afternoon.")], conversation_id="c1")
        await client.publish_turns([first, second])  # the second turn seals the window (window_turns = 2)
        await eventually(lambda: _async(spans.get_finished_spans()),
                         lambda found: any(s.name == "engram.window write" for s in found))
        found = await client.recall("What is the cat called?")  # one request: the window is written
        assert "Miso" in found.entries[0].text
        await client.consolidate()
    finished = list(spans.get_finished_spans())

    publishes = [s for s in finished if s.name == "engram.turns publish"]
    accepts = [s for s in finished if s.name == "engram.turns accept"]
    assert len(publishes) == 2 and len(accepts) == 2
    for publish in publishes:
        assert publish.context is not None and publish.kind is trace.SpanKind.PRODUCER
        accept = next(a for a in accepts if a.context is not None and a.context.trace_id == publish.context.trace_id)
        assert _parent_of(accept) == publish.context.span_id and accept.kind is trace.SpanKind.CONSUMER
    sealed, write = _one(finished, "engram.window sealed"), _one(finished, "engram.window write")
    sealing = next(a for a in accepts if a.context is not None and a.context.span_id == _parent_of(sealed))
    assert sealing.attributes is not None and sealing.attributes["engram.stream_seq"] == max(
        int(a.attributes["engram.stream_seq"]) for a in accepts if a.attributes is not None)  # the second turn
    assert {link.context.span_id for link in sealed.links} == {a.context.span_id for a in accepts if a.context}
    assert sealed.context is not None and _parent_of(write) == sealed.context.span_id
    assert write.context is not None
    for stage in ("engram.compress", "engram.embed", "engram.upsert"):
        span = _one(finished, stage)
        assert span.context is not None and span.context.trace_id == sealing.context.trace_id  # type: ignore[union-attr]
        assert _parent_of(span) == write.context.span_id
    print("\none turn (the one that sealed its window):\n" + _tree(finished, write.context.trace_id))

    request = _one(finished, "engram.recall request")
    assert request.context is not None and request.kind is trace.SpanKind.CLIENT
    handler = _one(finished, "mem.{tenant}.recall process")  # the pattern: a span name never names a tenant
    assert handler.context is not None and _parent_of(handler) == request.context.span_id
    for stage in ("working_memory", "plan", "embed", "search", "rerank", "render"):
        span = _one(finished, f"engram.recall {stage}")
        assert _parent_of(span) == handler.context.span_id, stage
    print("one recall:\n" + _tree(finished, request.context.trace_id))

    asked = _one(finished, "engram.consolidate request")  # the consolidator continues a trace the same way
    assert asked.context is not None
    assert _parent_of(_one(finished, "mem.{tenant}.consolidate process")) == asked.context.span_id


async def _async(value: tuple[ReadableSpan, ...]) -> tuple[ReadableSpan, ...]:
    return value
