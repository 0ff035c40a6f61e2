"""Spans for the request-reply handlers: FastStream's NATS telemetry middleware, added only while tracing is on.

It continues the requester's trace from the request's `traceparent` header and makes its `process` span current for
the handler, so engram's stage spans are its children; the reply's publish is a span of its own. Its span names are
made of the destination, which would name the tenant (and the requester's inbox): here they name the subject's
pattern (`mem.{tenant}.recall process`) and `(temporary) publish` for a reply, the full subject staying an attribute.
"""
from typing import Any

from faststream.message import StreamMessage
from faststream.nats.opentelemetry.provider import NatsTelemetrySettingsProvider
from faststream.nats.response import NatsPublishCommand
from faststream.opentelemetry import TelemetryMiddleware
from nats.aio.msg import Msg

from engram_client import subjects
from shared.tracing import spans

TEMPORARY = "(temporary)"  # OpenTelemetry's name for an anonymous destination (a reply inbox)


class _Named(NatsTelemetrySettingsProvider):
    """FastStream's NATS span attributes, with span names of bounded cardinality."""

    __slots__ = ("_prefix",)

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._prefix = prefix

    def _pattern(self, subject: str) -> str:
        tenant, kind = subjects.parse(subject)
        if not subject.startswith(f"{self._prefix}.") or not kind:
            return TEMPORARY
        return subject if tenant == "unknown" else f"{self._prefix}.{{tenant}}.{kind}"

    def get_consume_destination_name(self, msg: StreamMessage[Msg]) -> str:
        """The subscribed pattern, not the subject (which names the tenant)."""
        return self._pattern(msg.raw_message.subject)

    def get_publish_destination_name(self, cmd: NatsPublishCommand) -> str:  # type: ignore[override]
        """A reply's inbox is `(temporary)`."""
        return self._pattern(cmd.destination)


def middlewares(prefix: str) -> list[TelemetryMiddleware[NatsPublishCommand]]:
    """FastStream's telemetry middleware when spans are recorded, else none (tracing off costs nothing).

    Its messaging metrics stay off: Prometheus has engram's own.
    """
    if not spans.active():
        return []

    def provider(msg: Any) -> _Named | None:
        return _Named(prefix) if isinstance(msg, Msg) or msg is None else None  # None: a KV watch, untraced

    return [TelemetryMiddleware[NatsPublishCommand](settings_provider_factory=provider,
                                                    include_messages_counters=False)]
