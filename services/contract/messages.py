"""The messages of the published contract: the one module that names the contract models, the error classes and the
header names for `engram contract` (when the models move, only these imports change)."""
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from engram_client.contract import (
    SCHEMA_VERSION,
    ConsolidateRequest,
    ConsolidationSummary,
    EntriesForgotten,
    EntriesMerged,
    EntriesRequest,
    EntriesResponse,
    EntryCreated,
    EntrySuperseded,
    EventKind,
    ExportLine,
    ExportPage,
    ExportRequest,
    Flush,
    Forget,
    ForgetResult,
    ImportRequest,
    ImportResult,
    RecallRequest,
    RecallResponse,
    Reply,
    Turn,
)
from engram_client.contract.base import RESERVED_TENANT, TENANT_PATTERN
from engram_client.errors import (
    RETRY_AFTER_HEADER,
    EngramError,
    ErrorCode,
    Forbidden,
    InvalidRequest,
    NotFound,
    Timeout,
    Unavailable,
)
from shared.messaging import deadletter

# Re-exported for the other contract modules, so that only this one imports the contract and its errors.
__all__ = [
    "ERROR_CLASSES", "ERROR_REPLY", "EVENTS", "EXPORT_LINE", "FLUSH", "HEADER_MODELS", "REQUESTS", "RESERVED_TENANT",
    "RETRY_AFTER_HEADER", "SCHEMA_VERSION", "TENANT_PATTERN", "TURN", "DeadLetterHeaders", "ErrorReply", "EventKind",
    "Message", "ReplyHeaders", "RequestReply", "TurnHeaders", "messages",
]
ERROR_CLASSES: list[type[EngramError]] = [InvalidRequest, Forbidden, NotFound, Unavailable, Timeout, EngramError]


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
EVENTS: dict[EventKind, Message] = {
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
    RequestReply("export", "consolidator",
                 Message(ExportRequest, "in", "Ask for a page of everything engram holds of the tenant or one user"),
                 Message(ExportPage, "out", "A page of entries (every kind and state) or of working-memory turns"),
                 "Export the tenant's or one user's memory, page by page"),
    RequestReply("import", "consolidator",
                 Message(ImportRequest, "in", "Load a batch of an export file's lines into the tenant"),
                 Message(ImportResult, "out", "What was written, and what was there already"),
                 "Import a batch of an export file (operators only: exported to no tenant's NATS account)"),
]
# Not a message on the wire: the line of an export file, the format `engram export` writes and `engram import` reads.
EXPORT_LINE = Message(ExportLine, "in", "One line of an export file")
HEADER_MODELS: list[type[BaseModel]] = [TurnHeaders, ReplyHeaders, DeadLetterHeaders]


def messages() -> list[Message]:
    """Every message of the contract, each once."""
    found = [TURN, FLUSH, *(m for r in REQUESTS for m in (r.request, r.reply)), ERROR_REPLY, *EVENTS.values(),
             EXPORT_LINE]
    return found
