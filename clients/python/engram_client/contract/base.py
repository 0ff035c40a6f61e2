"""Common pieces of the v1 wire contract: the base model, bounded id types, tenant checks, the error body."""
import re
import uuid
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, FiniteFloat, StringConstraints, field_validator

from engram_client.errors import ErrorCode, Forbidden, InvalidRequest

SCHEMA_VERSION = 1
TENANT_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
MAX_TEXT_CHARS = 16_000
MAX_QUERY_CHARS = 2_000
MAX_K = 100
MAX_TOKEN_BUDGET = 32_000
MAX_LIST_ITEMS = 32
MAX_IDS = 256

RESERVED_TENANT = "dlq"  # `<prefix>.dlq.…` carries dead letters, so no tenant may be called that
_TENANT_RE = re.compile(TENANT_PATTERN)

def _not_reserved(value: str) -> str:
    if value == RESERVED_TENANT:
        raise ValueError(f"tenant id {RESERVED_TENANT!r} is reserved for dead letters")
    return value


TenantId = Annotated[str, StringConstraints(pattern=TENANT_PATTERN), AfterValidator(_not_reserved)]
# Ids end up in NATS message ids and KV keys, so no whitespace or control characters.
Id = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:@=+/-]+$")]


def _uuid_text(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise ValueError("entry ids are UUIDs, as entries, recall and events give them") from None


# Stored entries are addressed by UUID (both Qdrant engines need one); the canonical lowercase form.
EntryId = Annotated[str, StringConstraints(min_length=32, max_length=45), AfterValidator(_uuid_text)]
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must contain non-whitespace text")
    return value


Text = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT_CHARS), AfterValidator(_not_blank)]
Query = Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS), AfterValidator(_not_blank)]
MetadataValue = str | int | FiniteFloat | bool | None  # NaN and Infinity are not JSON: refused


class ContractModel(BaseModel):
    """Frozen, closed (unknown fields refused) and versioned: the shape of every wire message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SCHEMA_VERSION

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != SCHEMA_VERSION:
            raise ValueError(f"schema_version {value} is not supported; this service speaks {SCHEMA_VERSION}")
        return value


class TenantScoped(ContractModel):
    """A payload that may name its tenant; the subject's tenant is the one that counts."""

    tenant_id: TenantId | None = None


def validate_tenant(tenant: str) -> str:
    """Return the tenant id taken from a subject, or raise InvalidRequest if it is not a valid id."""
    if not _TENANT_RE.fullmatch(tenant):  # `$` alone would let a trailing newline through
        raise InvalidRequest(f"tenant id {tenant!r} does not match {TENANT_PATTERN}")
    if tenant == RESERVED_TENANT:
        raise InvalidRequest(f"tenant id {RESERVED_TENANT!r} is reserved for dead letters")
    return tenant


def check_tenant(payload: TenantScoped, tenant: str) -> None:
    """Raise Forbidden when the payload names a tenant other than the subject's."""
    validate_tenant(tenant)
    if payload.tenant_id is not None and payload.tenant_id != tenant:
        raise Forbidden(f"payload tenant {payload.tenant_id!r} != subject tenant {tenant!r}")


class ErrorBody(BaseModel):
    """The error part of a reply: a stable code and a message that names the thing and the id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: ErrorCode
    message: str


class Reply(ContractModel):
    """Base of request-reply answers: either the result fields or `error`."""

    error: ErrorBody | None = None


def bounded_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Refuse metadata that would bloat every stored turn: at most 32 keys, keys up to 64 chars."""
    if len(value) > MAX_LIST_ITEMS:
        raise ValueError(f"metadata has {len(value)} keys; at most {MAX_LIST_ITEMS} are allowed")
    for key, item in value.items():
        if not 0 < len(key) <= 64:
            raise ValueError(f"metadata key {key[:70]!r} must be 1-64 characters")
        if isinstance(item, str) and len(item) > 1024:
            raise ValueError(f"metadata value for {key!r} is {len(item)} characters; at most 1024 are allowed")
    return value


