"""The wire's errors: each EngramError carries its code and whether a retry can help; `from_code` rebuilds one from
an `error{code, message}` reply."""
from typing import ClassVar, Literal

ErrorCode = Literal["invalid_request", "forbidden", "not_found", "unavailable", "timeout", "internal"]

# A reply refusing a request that the same request shortly will pass carries this header (milliseconds to wait);
# MemoryClient honours it, asking again after that long, backing off, within the request's timeout.
RETRY_AFTER_HEADER = "Engram-Retry-After-Ms"


class EngramError(Exception):
    """Root of every error engram raises on purpose; its code is `internal` unless a subclass says otherwise."""

    code: ClassVar[ErrorCode] = "internal"
    retryable: ClassVar[bool] = False


class InvalidRequest(EngramError):
    """The input cannot be processed as given; resending it unchanged will fail again."""

    code = "invalid_request"


class Forbidden(EngramError):
    """The caller may not do this, e.g. a payload naming another tenant than its subject."""

    code = "forbidden"


class NotFound(EngramError):
    """The named entry, conversation or user does not exist for this tenant."""

    code = "not_found"


class Unavailable(EngramError):
    """A dependency (store, embedder, broker, LLM) cannot be reached right now."""

    code = "unavailable"
    retryable = True


class Timeout(EngramError):
    """A dependency did not answer in time."""

    code = "timeout"
    retryable = True


_BY_CODE: dict[str, type[EngramError]] = {
    "invalid_request": InvalidRequest, "forbidden": Forbidden, "not_found": NotFound, "unavailable": Unavailable,
    "timeout": Timeout, "internal": EngramError,
}


def from_code(code: str, message: str) -> EngramError:
    """The exception a client raises for an `error{code, message}` reply."""
    return _BY_CODE.get(code, EngramError)(f"{code}: {message}")
