"""The AsyncAPI 3.0 document of engram's NATS API: what FastStream generates from the services' handlers, completed by
hand from the contract's messages (see services/contract/__init__.py for what is which)."""
from dataclasses import dataclass
from typing import Any, cast

from faststream.nats import NatsBroker
from faststream.specification import AsyncAPI

from engram_client import subjects
from services.consolidator import app as consolidator
from services.consolidator.deps import ConsolidatorDeps
from services.contract.messages import (
    ERROR_REPLY,
    EVENTS,
    FLUSH,
    REQUESTS,
    RESERVED_TENANT,
    RETRY_AFTER_HEADER,
    SCHEMA_VERSION,
    TENANT_PATTERN,
    TURN,
    Message,
)
from services.contract.schemas import components
from services.retriever import app as retriever
from services.retriever.deps import RetrieverDeps
from shared.messaging import streams
from shared.settings import Settings

PREFIX = "mem"


@dataclass
class _Unopened:
    """The one dependency the services' build functions touch while wiring handlers: the broker. The handlers'
    bodies (which use the rest) never run here."""

    broker: NatsBroker


def faststream_document(settings: Settings) -> dict[str, Any]:
    """The AsyncAPI 3.0 document FastStream generates from the retriever's and consolidator's real handlers."""
    broker = NatsBroker(f"nats://127.0.0.1:{settings.nats_port}")
    retriever.build(settings, cast(RetrieverDeps, _Unopened(broker)))
    consolidator.build(settings, cast(ConsolidatorDeps, _Unopened(broker)))
    spec = AsyncAPI(broker, title="engram", version="1", schema_version="3.0.0").to_specification()
    document: dict[str, Any] = spec.to_jsonable()
    return document


def _tenant_param() -> dict[str, Any]:
    return {"description": f"The tenant id, `{TENANT_PATTERN}`, never `{RESERVED_TENANT}`. engram takes the tenant "
                           "from the subject; a payload's `tenant_id`, when given, must equal it (else `forbidden`). "
                           "NATS permissions can confine a product to `mem.<its tenant>.>`.",
            "examples": ["acme"]}


def _ref(*path: str) -> dict[str, str]:
    return {"$ref": "#/" + "/".join(path)}


def _message(m: Message, headers: str | None = None) -> dict[str, Any]:
    doc = (m.model.__doc__ or "").strip()
    out: dict[str, Any] = {"name": m.name, "title": m.name, "summary": m.summary, "contentType": "application/json",
                           "payload": _ref("components", "schemas", m.name)}
    if doc:
        out["description"] = doc
    if headers:
        out["headers"] = _ref("components", "schemas", headers)
    return out


def _faststream_parts(settings: Settings) -> tuple[dict[str, Any], dict[str, str]]:
    """The server and each request-reply channel's queue group, as FastStream found them in the handlers."""
    generated = faststream_document(settings)
    queues: dict[str, str] = {}
    for channel in generated["channels"].values():
        address = channel["address"]
        queue = channel.get("bindings", {}).get("nats", {}).get("queue") or ""
        if address.startswith(f"{PREFIX}."):
            queues[address.split(".")[-1]] = queue
    documented = {r.kind for r in REQUESTS}
    if set(queues) != documented:
        raise RuntimeError(f"the services answer {sorted(queues)} but the contract documents {sorted(documented)}: "
                           "add the new handler's request and reply to services/contract.py")
    server = next(iter(generated["servers"].values()))
    return server, queues


def asyncapi(settings: Settings | None = None) -> dict[str, Any]:
    """The AsyncAPI 3.0 document of engram's NATS API (with the default `mem` prefix)."""
    # The defaults, never the environment's ENGRAM_* values: the published document is the same on every machine.
    settings = settings or Settings.model_construct(subject_prefix=PREFIX)
    server, queues = _faststream_parts(settings)
    tenant = {"tenant": _tenant_param()}
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    component_messages: dict[str, Any] = {}
    schemas = components()
    schemas["PubAck"] = {
        "title": "PubAck", "type": "object", "required": ["stream", "seq"],
        "description": "JetStream's acknowledgement (sent by the NATS server, not by engram)",
        "properties": {"stream": {"type": "string"}, "seq": {"type": "integer", "minimum": 1},
                       "duplicate": {"type": "boolean", "description": "true when this Nats-Msg-Id was seen"}}}
    component_messages["PubAck"] = {"name": "PubAck", "title": "PubAck", "contentType": "application/json",
                                    "summary": "The stream stored the message (or had it already)",
                                    "payload": _ref("components", "schemas", "PubAck")}
    jetstream = {"stream": streams.turns_stream(PREFIX, "{tenant}"),
                 "subjects": [subjects.turns(PREFIX), subjects.flush(PREFIX)],
                 "retention": "limits", "storage": "file", "max_age_s": streams.DEFAULT_TURN_RETENTION_S,
                 "duplicate_window_s": streams.TURNS_DUPLICATE_WINDOW_S, "discard": "new",
                 "consumer": streams.INGESTOR_DURABLE,
                 "description": "one stream per tenant, made on its first message: its de-duplication window, "
                                "its storage quota (max_bytes) and its consumer are its own"}

    channels["pubAck"] = {"address": None, "description": "The publisher's reply subject: JetStream answers there.",
                          "messages": {"PubAck": _ref("components", "messages", "PubAck")}}
    for key, msg, subject, what in [
            ("turns", TURN, subjects.turns(PREFIX), "Chat turns, at least once; publish with `Nats-Msg-Id` = "
             "`<tenant>:<conversation_id>:<turn_id>` so JetStream drops a duplicate (within the tenant's own "
             "stream: another tenant's ids never collide with it)."),
            ("flush", FLUSH, subjects.flush(PREFIX), "Close a conversation's open window; in the turns' stream, "
             "so it is ordered after the turns it closes.")]:
        component_messages[msg.name] = _message(msg, "TurnHeaders" if msg is TURN else None)
        channels[key] = {"address": subject, "title": key, "description": what, "parameters": tenant,
                         "messages": {msg.name: _ref("components", "messages", msg.name)},
                         "x-jetstream": jetstream}
        operations[f"receive{msg.name}"] = {
            "action": "receive", "channel": _ref("channels", key), "summary": msg.summary,
            "description": f"The ingestors consume it through the durable pull consumer `{streams.INGESTOR_DURABLE}`;"
                           " a message they cannot accept goes to the dead letters with its reason.",
            "messages": [_ref("channels", key, "messages", msg.name)],
            "reply": {"channel": _ref("channels", "pubAck"), "messages": [_ref("channels", "pubAck", "messages",
                                                                                "PubAck")]}}

    component_messages[ERROR_REPLY.name] = _message(ERROR_REPLY, "ReplyHeaders")
    for rr in REQUESTS:
        component_messages[rr.request.name] = _message(rr.request)
        component_messages[rr.reply.name] = _message(rr.reply, "ReplyHeaders")
        reply_key = f"{rr.kind}Reply"
        address = getattr(subjects, rr.kind, None) or getattr(subjects, f"{rr.kind}_")  # `import` is a keyword
        channels[rr.kind] = {"address": address(PREFIX), "title": rr.kind,
                             "description": rr.summary + ". Request-reply.", "parameters": tenant,
                             "messages": {rr.request.name: _ref("components", "messages", rr.request.name)}}
        channels[reply_key] = {
            "address": None, "description": f"The requester's reply subject (an inbox): the answer to {rr.kind}.",
            "messages": {rr.reply.name: _ref("components", "messages", rr.reply.name),
                         ERROR_REPLY.name: _ref("components", "messages", ERROR_REPLY.name)}}
        operations[rr.kind] = {
            "action": "receive", "channel": _ref("channels", rr.kind), "summary": rr.summary,
            "description": f"Answered by the `{queues[rr.kind]}` queue group. Every failure is answered, never left "
                           "to time out: `error{code, message}` with the codes of ErrorBody; `unavailable` and "
                           f"`timeout` are worth retrying, and an `unavailable` carrying `{RETRY_AFTER_HEADER}` "
                           "asks to be retried after that many milliseconds.",
            "messages": [_ref("channels", rr.kind, "messages", rr.request.name)],
            "bindings": {"nats": {"queue": queues[rr.kind], "bindingVersion": "0.1.0"}},
            "reply": {"channel": _ref("channels", reply_key),
                      "messages": [_ref("channels", reply_key, "messages", rr.reply.name),
                                   _ref("channels", reply_key, "messages", ERROR_REPLY.name)]}}

    for kind, msg in EVENTS.items():
        component_messages[msg.name] = _message(msg)
        key = f"events.{kind}"
        channels[key] = {"address": subjects.events(PREFIX, kind=kind), "title": kind,
                         "description": f"{msg.summary}. Core NATS, at least once: de-duplicate on `event_id`.",
                         "parameters": tenant, "messages": {msg.name: _ref("components", "messages", msg.name)}}
        operations[f"send{msg.name}"] = {"action": "send", "channel": _ref("channels", key), "summary": msg.summary,
                                         "messages": [_ref("channels", key, "messages", msg.name)]}

    component_messages["DeadLetter"] = {
        "name": "DeadLetter", "title": "DeadLetter", "summary": "A message engram could not process",
        "description": "The body is the original message as it was published (a turn a closer could not write is "
                       "the turn, ready to publish again); the headers say why.",
        "headers": _ref("components", "schemas", "DeadLetterHeaders"), "payload": {}}
    channels["deadLetters"] = {
        "address": subjects.dlq(PREFIX, service="{service}"), "title": "dead letters",
        "description": "Messages that could not be processed, with the reason in headers; read a tenant's from "
                       f"`{subjects.dlq(PREFIX, 'acme')}`. The service token keeps this stream's subjects apart "
                       "from the turns stream's.",
        "parameters": {"tenant": {**_tenant_param(), "description": "the tenant of the message (`unknown` when its "
                                  "subject named none)"},
                       "service": {"enum": ["ingestor", "closer"], "description": "which part of engram gave up"}},
        "messages": {"DeadLetter": _ref("components", "messages", "DeadLetter")},
        "x-jetstream": {"stream": streams.dlq_stream(PREFIX), "subjects": streams.dlq_subjects(PREFIX),
                        "retention": "limits", "storage": "file", "max_age_s": streams.DLQ_MAX_AGE_S}}
    operations["sendDeadLetter"] = {"action": "send", "channel": _ref("channels", "deadLetters"),
                                    "summary": "Dead-letter a message with its reason",
                                    "messages": [_ref("channels", "deadLetters", "messages", "DeadLetter")]}

    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "engram",
            "version": str(SCHEMA_VERSION),
            "description": (
                "The NATS API of engram, a conversational-memory service: chat products publish turns, any service "
                "recalls memories by request-reply, engram announces changes as events. Every payload is a JSON "
                f"object with `schema_version` {SCHEMA_VERSION}; unknown fields are refused. The subject prefix "
                f"(`{PREFIX}` here) is configurable (ENGRAM_SUBJECT_PREFIX). Generated by `engram contract` from "
                "the pydantic models and the services' handlers; do not edit."),
        },
        "defaultContentType": "application/json",
        "servers": {"embedded": {**server, "protocolVersion": "2",
                                 "description": "`engram up`'s embedded nats-server (ENGRAM_NATS_PORT); at scale, "
                                                "the NATS cluster in ENGRAM_NATS_URL"}},
        "channels": channels,
        "operations": operations,
        "components": {"schemas": schemas, "messages": component_messages},
    }
