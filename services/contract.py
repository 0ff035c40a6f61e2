"""The published contract: a JSON Schema per wire message and the AsyncAPI 3.0 document of the NATS API.

Both come from the pydantic models (the one source of the contract) and, for the request-reply channels, from the
services' own FastStream handlers. This is the one module that names the contract models for publishing: when they
move, only its imports change.

FastStream generates, from the retriever's and consolidator's handlers: the server, each request-reply channel's
subject and queue group, and a receive operation per handler. Its document has no payloads for these handlers (they
take the raw body, for speed and for exact error messages), no replies (FastStream 0.7 writes no AsyncAPI 3 `reply`),
and nothing for the ingestor (a JetStream pull consumer of its own) or for what engram publishes with plain NATS
(events, dead letters). This module adds those by hand: the payloads and replies from the models, the headers
(`Nats-Msg-Id`, `Engram-Retry-After-Ms`, the dead-letter headers), the JetStream streams, the tenant parameter.
"""
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import yaml
from faststream.nats import NatsBroker
from faststream.specification import AsyncAPI
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema
from pydantic_core import core_schema

from services.consolidator.app import build_consolidator
from services.retriever.app import build_retriever
from shared.contract import (
    SCHEMA_VERSION,
    ConsolidateRequest,
    ConsolidationSummary,
    EntriesForgotten,
    EntriesMerged,
    EntriesRequest,
    EntriesResponse,
    EntryCreated,
    EntrySuperseded,
    Flush,
    Forget,
    ForgetResult,
    RecallRequest,
    RecallResponse,
    Reply,
    Turn,
)
from shared.contract.base import RESERVED_TENANT, TENANT_PATTERN
from shared.errors import RETRY_AFTER_HEADER, ErrorCode
from shared.messaging import deadletter, streams, subjects
from shared.runtime.consolidator import ConsolidatorDeps
from shared.runtime.retriever import RetrieverDeps
from shared.settings import Settings

ASYNCAPI_FILE = "asyncapi.yaml"
SCHEMAS_DIR = "schemas"
_REF = "#/components/schemas/{model}"
_PREFIX = "mem"


class TurnHeaders(BaseModel):
    """Headers of a turn published to JetStream."""

    model_config = ConfigDict(frozen=True, extra="allow", title="TurnHeaders")

    msg_id: str = Field(alias="Nats-Msg-Id", description=(
        "`<tenant>:<conversation_id>:<turn_id>`: JetStream drops a second publish of the same id within the "
        "stream's duplicate window, so a turn published twice is stored once"))


class ReplyHeaders(BaseModel):
    """Headers of a request-reply answer."""

    model_config = ConfigDict(frozen=True, extra="allow", title="ReplyHeaders")

    retry_after_ms: str | None = Field(default=None, alias=RETRY_AFTER_HEADER, pattern=r"^[0-9]+$", description=(
        "On an `unavailable` reply: the tenant has its share of the service's workers in flight; the same request "
        "after this many milliseconds will pass. Ask again after it, doubling the wait each time (with jitter), "
        "for as long as the request's own timeout allows"))


class DeadLetterHeaders(BaseModel):
    """Headers of a dead-lettered message: why engram could not process it, and where it came from."""

    model_config = ConfigDict(frozen=True, extra="allow", title="DeadLetterHeaders")

    code: ErrorCode = Field(alias=deadletter.HEADER_CODE, description="the wire error code")
    reason: str = Field(alias=deadletter.HEADER_REASON, description="what was wrong, naming the thing and the id")
    subject: str = Field(alias=deadletter.HEADER_SUBJECT, description="the subject the message was published to")
    deliveries: str = Field(alias=deadletter.HEADER_DELIVERIES, pattern=r"^[0-9]+$",
                            description="how many times engram tried it")
    service: str = Field(alias=deadletter.HEADER_SERVICE, description="`ingestor` or `closer`")
    sequence: str = Field(alias=deadletter.HEADER_SEQUENCE, pattern=r"^[0-9]*$",
                          description="its sequence in the turns stream (empty for a turn a closer dead-lettered)")
    truncated_from: str | None = Field(default=None, alias=deadletter.HEADER_TRUNCATED, pattern=r"^[0-9]+$",
                                       description="the body's original size, when only its start fits")


class ErrorReply(Reply):
    """What every request-reply channel answers when the request failed: `schema_version` and `error` only."""

    model_config = ConfigDict(title="ErrorReply")


Direction = Literal["in", "out"]  # what engram receives (validation schema) or sends (serialization schema)


@dataclass(frozen=True)
class Message:
    """One wire message of the published contract."""

    model: type[BaseModel]
    direction: Direction
    summary: str

    @property
    def name(self) -> str:
        """The message's (and its schema's) name."""
        return str(self.model.model_config.get("title") or self.model.__name__)


TURN = Message(Turn, "in", "One chat turn")
FLUSH = Message(Flush, "in", "Close a conversation's open window")
ERROR_REPLY = Message(ErrorReply, "out", "A failed request's answer: error{code, message}")
EVENTS: dict[str, Message] = {
    "entry_created": Message(EntryCreated, "out", "A closed window became a stored entry"),
    "entries_merged": Message(EntriesMerged, "out", "Near-duplicates were merged into one entry"),
    "entry_superseded": Message(EntrySuperseded, "out", "A newer statement superseded an older fact"),
    "entries_forgotten": Message(EntriesForgotten, "out", "Entries were deleted (forget, TTL, retention, cap)"),
}


@dataclass(frozen=True)
class RequestReply:
    """A request-reply channel: its request and its answer."""

    kind: str
    queue: str
    request: Message
    reply: Message
    summary: str


REQUESTS = [
    RequestReply("recall", "retriever", Message(RecallRequest, "in", "Ask for the memories that matter to a query"),
                 Message(RecallResponse, "out", "Entries, working memory and a rendered context"),
                 "Recall the memories relevant to a query"),
    RequestReply("entries", "retriever", Message(EntriesRequest, "in", "List, get or trace stored entries"),
                 Message(EntriesResponse, "out", "A page of entries"), "Admin access to stored entries"),
    RequestReply("forget", "consolidator",
                 Message(Forget, "in", "Delete a user's, a conversation's or some entries' data everywhere"),
                 Message(ForgetResult, "out", "The receipt: what was deleted, what a check still found"),
                 "Forget a user, a conversation or entries (the one hard delete)"),
    RequestReply("consolidate", "consolidator",
                 Message(ConsolidateRequest, "in", "Run the consolidation jobs now"),
                 Message(ConsolidationSummary, "out", "What the run changed"),
                 "Run the consolidation jobs for the tenant (or one user) now"),
]
HEADER_MODELS: list[type[BaseModel]] = [TurnHeaders, ReplyHeaders, DeadLetterHeaders]


def messages() -> list[Message]:
    """Every message of the contract, each once."""
    found = [TURN, FLUSH, *(m for r in REQUESTS for m in (r.request, r.reply)), ERROR_REPLY, *EVENTS.values()]
    return found


class _ContractSchema(GenerateJsonSchema):
    """Pydantic's JSON Schema, with what pydantic cannot see of the models: every field of a message engram sends
    is always present (it serializes them all), and `schema_version` takes one value."""

    def field_is_required(self, field: core_schema.ModelField | core_schema.DataclassField
                          | core_schema.TypedDictField, total: bool) -> bool:
        """In what engram sends every field is there, defaults included."""
        if self.mode == "serialization":
            return not field.get("serialization_exclude")
        return super().field_is_required(field, total)


def _fix(node: Any) -> Any:
    """Hand-written refinements of a schema that validators (not types) enforce in the models."""
    if isinstance(node, dict):
        fixed = {key: _fix(value) for key, value in node.items()}
        props = fixed.get("properties")
        if isinstance(props, dict) and "schema_version" in props:
            props["schema_version"] = {"const": SCHEMA_VERSION, "default": SCHEMA_VERSION, "title": "Schema Version",
                                       "type": "integer", "description": "the contract version; another is refused"}
        if fixed.get("pattern") == TENANT_PATTERN:
            fixed["not"] = {"const": RESERVED_TENANT}
            fixed["description"] = f"a tenant id; `{RESERVED_TENANT}` is reserved for dead letters"
        return fixed
    if isinstance(node, list):
        return [_fix(item) for item in node]
    return node


def _components() -> dict[str, dict[str, Any]]:
    """Every schema the contract uses, by name, with refs into `#/components/schemas/`.

    A model that reads differently when engram receives it and when it sends it (a Turn published, a Turn in a
    recall's working memory) gets `<Name>` for the first and `<Name>Output` for the second.
    """
    wanted: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (m.model, "validation" if m.direction == "in" else "serialization") for m in messages()]
    wanted += [(model, "validation") for model in HEADER_MODELS]
    _, top = models_json_schema(wanted, ref_template=_REF, schema_generator=_ContractSchema)
    defs: dict[str, dict[str, Any]] = top["$defs"]
    renames = {name: name.replace("-Input", "").replace("-Output", "Output") for name in defs}
    text = json.dumps(defs)
    for old, new in renames.items():
        text = text.replace(json.dumps(_REF.format(model=old)), json.dumps(_REF.format(model=new)))
    renamed: dict[str, dict[str, Any]] = {renames[name]: schema for name, schema in json.loads(text).items()}
    for name, schema in renamed.items():
        schema["title"] = name
    return {name: _fix(renamed[name]) for name in sorted(renamed)}


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref.rsplit("/", 1)[-1]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def json_schemas() -> dict[str, dict[str, Any]]:
    """A self-contained JSON Schema (2020-12) per message and per header set, by file name."""
    components = _components()
    out: dict[str, dict[str, Any]] = {}
    for name in [m.name for m in messages()] + [str(h.model_config["title"]) for h in HEADER_MODELS]:
        needed: list[str] = []
        todo = list(_refs(components[name]))
        while todo:
            ref = todo.pop()
            if ref not in needed and ref != name:
                needed.append(ref)
                todo.extend(_refs(components[ref]))
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **components[name]}
        if needed:
            schema["$defs"] = {ref: components[ref] for ref in sorted(needed)}
        text = json.dumps(schema).replace('"#/components/schemas/', '"#/$defs/')
        out[f"{name}.json"] = json.loads(text)
    return out


@dataclass
class _Unopened:
    """The one dependency the services' build functions touch while wiring handlers: the broker. The handlers'
    bodies (which use the rest) never run here."""

    broker: NatsBroker


def faststream_document(settings: Settings) -> dict[str, Any]:
    """The AsyncAPI 3.0 document FastStream generates from the retriever's and consolidator's real handlers."""
    broker = NatsBroker(f"nats://127.0.0.1:{settings.nats_port}")
    build_retriever(settings, cast(RetrieverDeps, _Unopened(broker)))
    build_consolidator(settings, cast(ConsolidatorDeps, _Unopened(broker)))
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
        if address.startswith(f"{_PREFIX}."):
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
    settings = settings or Settings.model_construct(subject_prefix=_PREFIX)
    server, queues = _faststream_parts(settings)
    tenant = {"tenant": _tenant_param()}
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    component_messages: dict[str, Any] = {}
    schemas = _components()
    schemas["PubAck"] = {
        "title": "PubAck", "type": "object", "required": ["stream", "seq"],
        "description": "JetStream's acknowledgement (sent by the NATS server, not by engram)",
        "properties": {"stream": {"type": "string"}, "seq": {"type": "integer", "minimum": 1},
                       "duplicate": {"type": "boolean", "description": "true when this Nats-Msg-Id was seen"}}}
    component_messages["PubAck"] = {"name": "PubAck", "title": "PubAck", "contentType": "application/json",
                                    "summary": "The stream stored the message (or had it already)",
                                    "payload": _ref("components", "schemas", "PubAck")}
    jetstream = {"stream": streams.turns_stream(_PREFIX), "subjects": streams.turns_subjects(_PREFIX),
                 "retention": "limits", "storage": "file", "max_age_s": streams.DEFAULT_TURN_RETENTION_S,
                 "duplicate_window_s": streams.TURNS_DUPLICATE_WINDOW_S, "consumer": streams.INGESTOR_DURABLE}

    channels["pubAck"] = {"address": None, "description": "The publisher's reply subject: JetStream answers there.",
                          "messages": {"PubAck": _ref("components", "messages", "PubAck")}}
    for key, msg, subject, what in [
            ("turns", TURN, subjects.turns(_PREFIX), "Chat turns, at least once; publish with `Nats-Msg-Id` = "
             "`<tenant>:<conversation_id>:<turn_id>` so JetStream drops a duplicate."),
            ("flush", FLUSH, subjects.flush(_PREFIX), "Close a conversation's open window; in the turns' stream, "
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
        channels[rr.kind] = {"address": getattr(subjects, rr.kind)(_PREFIX), "title": rr.kind,
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
        channels[key] = {"address": subjects.events(_PREFIX, kind=cast(Any, kind)), "title": kind,
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
        "address": subjects.dlq(_PREFIX, service="{service}"), "title": "dead letters",
        "description": "Messages that could not be processed, with the reason in headers; read a tenant's from "
                       f"`{subjects.dlq(_PREFIX, 'acme')}`. The service token keeps this stream's subjects apart "
                       "from the turns stream's.",
        "parameters": {"tenant": {**_tenant_param(), "description": "the tenant of the message (`unknown` when its "
                                  "subject named none)"},
                       "service": {"enum": ["ingestor", "closer"], "description": "which part of engram gave up"}},
        "messages": {"DeadLetter": _ref("components", "messages", "DeadLetter")},
        "x-jetstream": {"stream": streams.dlq_stream(_PREFIX), "subjects": streams.dlq_subjects(_PREFIX),
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
                f"(`{_PREFIX}` here) is configurable (ENGRAM_SUBJECT_PREFIX). Generated by `engram contract` from "
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


class _PlainDumper(yaml.SafeDumper):
    """YAML without anchors and aliases: each channel spells its parameters out, as a reader expects."""

    def ignore_aliases(self, data: Any) -> bool:
        """Never write an alias."""
        return True


def render(settings: Settings | None = None) -> dict[str, str]:
    """Every published file, by path relative to the contract folder, as its exact text."""
    files = {f"{SCHEMAS_DIR}/{name}": json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
             for name, schema in json_schemas().items()}
    header = "# Generated by `engram contract` (make contract) from the pydantic models; do not edit.\n"
    files[ASYNCAPI_FILE] = header + yaml.dump(asyncapi(settings), Dumper=_PlainDumper, sort_keys=False,
                                              allow_unicode=True, width=120)
    return files


def write(folder: Path) -> list[Path]:
    """Write the contract files into `folder`, removing schemas of messages that no longer exist."""
    files = render()
    (folder / SCHEMAS_DIR).mkdir(parents=True, exist_ok=True)
    for stale in (folder / SCHEMAS_DIR).glob("*.json"):
        if f"{SCHEMAS_DIR}/{stale.name}" not in files:
            stale.unlink()
    written = []
    for relative, text in files.items():
        path = folder / relative
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def differences(folder: Path) -> list[str]:
    """The contract files in `folder` that differ from what the models give now (missing and stale included)."""
    files = render()
    found = {f"{SCHEMAS_DIR}/{p.name}" for p in (folder / SCHEMAS_DIR).glob("*.json")} | (
        {ASYNCAPI_FILE} if (folder / ASYNCAPI_FILE).exists() else set())
    out = sorted(name for name in found - set(files))
    for relative, text in files.items():
        path = folder / relative
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            out.append(relative)
    return out

