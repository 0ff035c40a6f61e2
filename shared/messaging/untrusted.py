"""What engram reads back from its own NATS state is untrusted input: a key or a value that does not parse (written
by an older or broken engram, by hand, or by anyone who can reach the buckets) is reported and read as absent.

It never stops a watch, a forget, a lease or a schedule, and it is never blamed on the client whose request read it
(a pydantic ValidationError escaping to a request handler would be answered `invalid_request`). The caller decides
what absent means in its place: a buffer or a mark is written over at the next change (repaired), a text or a summary
is missing (made again or counted as missing), an unreadable open-index key is skipped.
"""
import json
import logging
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from shared.runtime import metrics

log = logging.getLogger("engram.state")
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def unreadable(place: str, key: str, exc: BaseException) -> None:
    """Count and log a value of engram's own state that could not be parsed (its key, never its content)."""
    metrics.state_unreadable_total.labels(place).inc()
    log.error("unreadable %s value under key %r (%s); read as absent", place, key[:200], type(exc).__name__)


def model(kind: type[M], value: bytes | None, place: str, key: str) -> M | None:
    """`value` parsed as `kind`; None when it is empty or does not parse (reported)."""
    if not value:
        return None
    try:
        return kind.model_validate_json(value)
    except ValidationError as exc:
        unreadable(place, key, exc)
        return None


def read(parse: Callable[[bytes], T], value: bytes | None, place: str, key: str) -> T | None:
    """`parse(value)`; None when it is empty or `parse` raises (reported)."""
    if not value:
        return None
    try:
        return parse(value)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError, json.JSONDecodeError) as exc:
        unreadable(place, key, exc)
        return None
