"""engram's light client: MemoryClient over NATS, and the v1 wire contract (models, subjects, error codes) that the
server imports too, so there is one copy of it."""
from engram_client.client import EventStream, MemoryClient
from engram_client.contract import (
    ConsolidationSummary,
    EntriesRequest,
    EntriesResponse,
    EntryView,
    Flush,
    Forget,
    ForgetResult,
    RecalledEntry,
    RecallFilters,
    RecallRequest,
    RecallResponse,
    Turn,
)
from engram_client.errors import (
    RETRY_AFTER_HEADER,
    EngramError,
    ErrorCode,
    Forbidden,
    InvalidRequest,
    NotFound,
    Timeout,
    Unavailable,
    from_code,
)
from engram_client.security import NatsSecurity
from engram_client.sessions import publish_sessions, wait_until_stored

__all__ = [
    "RETRY_AFTER_HEADER", "ConsolidationSummary", "EngramError", "EntriesRequest", "EntriesResponse", "EntryView",
    "ErrorCode", "EventStream", "Flush", "Forbidden", "Forget", "ForgetResult", "InvalidRequest", "MemoryClient",
    "NatsSecurity", "NotFound", "RecallFilters", "RecallRequest", "RecallResponse", "RecalledEntry", "Timeout", "Turn",
    "Unavailable", "from_code", "publish_sessions", "wait_until_stored",
]
