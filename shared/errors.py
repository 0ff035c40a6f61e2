"""The error hierarchy: each EngramError carries its wire code and whether a retry can help."""
from typing import ClassVar, Literal

ErrorCode = Literal["invalid_request", "forbidden", "not_found", "unavailable", "timeout", "internal"]


class EngramError(Exception):
    """Root of every error engram raises on purpose."""

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


class Busy(Unavailable):
    """engram is behind on this conversation; the message is valid and waits, however long that takes."""


class OverShare(Unavailable):
    """The tenant already has its share of a service's workers in flight; the same request shortly will pass.

    Replies to it carry the header RETRY_AFTER_HEADER, which the SDK honours (it asks again after that long,
    backing off, within the request's timeout), so a busy tenant's well-behaved clients slow down instead of
    failing, and other tenants keep their share.
    """

    retry_after_s: ClassVar[float] = 0.05


RETRY_AFTER_HEADER = "Engram-Retry-After-Ms"


class Timeout(EngramError):
    """A dependency did not answer in time."""

    code = "timeout"
    retryable = True


class ConfigError(EngramError):
    """A setting is invalid; the message says how to fix it."""

    code = "invalid_request"


_BY_CODE: dict[str, type[EngramError]] = {
    "invalid_request": InvalidRequest, "forbidden": Forbidden, "not_found": NotFound, "unavailable": Unavailable,
    "timeout": Timeout, "internal": EngramError,
}


def from_code(code: str, message: str) -> EngramError:
    """The exception a client raises for an `error{code, message}` reply."""
    return _BY_CODE.get(code, EngramError)(f"{code}: {message}")


class LlmUnavailable(Unavailable):
    """The chat model cannot be asked now: over the tenant's budget, breaker open, timed out, rate-limited, down.

    `reason` is the bounded label the fallback is counted under.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class LlmInvalid(EngramError):
    """The chat model's answer did not validate, even after a repair round."""

    reason = "invalid"
