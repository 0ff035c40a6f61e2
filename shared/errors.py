"""The server's own errors, on top of the wire's hierarchy in engram_client.errors (codes, `from_code`)."""
from typing import ClassVar

from engram_client.errors import EngramError, Unavailable


class Busy(Unavailable):
    """engram is behind on this conversation; the message is valid and waits, however long that takes."""


class OverShare(Unavailable):
    """The tenant already has its share of a service's workers in flight; the same request shortly will pass.

    Replies to it carry the header RETRY_AFTER_HEADER (engram_client.errors), which the client honours (it asks
    again after that long, backing off, within the request's timeout), so a busy tenant's well-behaved clients slow
    down instead of failing, and other tenants keep their share.
    """

    retry_after_s: ClassVar[float] = 0.05


class ConfigError(EngramError):
    """A setting is invalid; the message says how to fix it."""

    code = "invalid_request"


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


class SetAside(EngramError):
    """A message or window whose handling the process did not survive (it died or hung) too often, set aside
    (dead-lettered). No client's fault: `internal`, with a message that says so and names no user text."""

    code = "internal"
    explained = True
