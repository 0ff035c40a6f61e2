"""The v1 wire contract: frozen pydantic models for every message engram sends or accepts."""
from engram_client.contract.admin import (
    ConsolidateRequest,
    ConsolidationJob,
    ConsolidationSummary,
    DeletedCounts,
    EntriesRequest,
    EntriesResponse,
    EntryKind,
    EntryView,
    Forget,
    ForgetResult,
    RebuildReport,
    RebuildRequest,
)
from engram_client.contract.base import (
    MAX_K,
    MAX_QUERY_CHARS,
    MAX_TEXT_CHARS,
    MAX_TOKEN_BUDGET,
    SCHEMA_VERSION,
    ContractModel,
    ErrorBody,
    Reply,
    TenantScoped,
    check_tenant,
    validate_tenant,
)
from engram_client.contract.events import (
    EVENT_TYPES,
    EntriesForgotten,
    EntriesMerged,
    EntryCreated,
    EntrySuperseded,
    Event,
    EventKind,
    event_id,
    parse_event,
)
from engram_client.contract.recall import (
    DEFAULT_K,
    DeepTrace,
    Explanation,
    PlannedSearch,
    PlannedTime,
    RecalledEntry,
    RecallFilters,
    RecallPlan,
    RecallRequest,
    RecallResponse,
    Timings,
)
from engram_client.contract.transfer import (
    EXPORT_FORMAT,
    EXPORT_FORMAT_VERSION,
    ExportedEntry,
    ExportedTurn,
    ExportHeader,
    ExportLine,
    ExportPage,
    ExportPart,
    ExportRequest,
    ImportRequest,
    ImportResult,
)
from engram_client.contract.turns import Flush, Role, Turn

__all__ = [
    "DEFAULT_K", "EVENT_TYPES", "EXPORT_FORMAT", "EXPORT_FORMAT_VERSION", "MAX_K", "MAX_QUERY_CHARS", "MAX_TEXT_CHARS",
    "MAX_TOKEN_BUDGET", "SCHEMA_VERSION", "ConsolidateRequest", "ConsolidationJob", "ConsolidationSummary",
    "ContractModel", "DeepTrace", "DeletedCounts", "EntriesForgotten", "EntriesMerged", "EntriesRequest",
    "EntriesResponse", "EntryCreated", "EntryKind", "EntrySuperseded", "EntryView", "ErrorBody", "Event", "EventKind",
    "Explanation", "ExportHeader", "ExportLine", "ExportPage", "ExportPart", "ExportRequest", "ExportedEntry",
    "ExportedTurn", "Flush", "Forget", "ForgetResult", "ImportRequest", "ImportResult", "PlannedSearch",
    "PlannedTime", "RebuildReport", "RebuildRequest", "RecallFilters", "RecallPlan", "RecallRequest", "RecallResponse",
    "RecalledEntry", "Reply", "Role", "TenantScoped", "Timings", "Turn", "check_tenant", "event_id", "parse_event",
    "validate_tenant",
]
