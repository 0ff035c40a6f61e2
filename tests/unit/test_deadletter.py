"""The settle decision: retry what may succeed later (up to max_deliver), wait out back-pressure, dead-letter
the rest."""
import json

import pytest
from pydantic import BaseModel, ValidationError

from engram_client.errors import EngramError, Forbidden, InvalidRequest, NotFound, Timeout, Unavailable
from shared.errors import Busy
from shared.messaging.deadletter import MAX_RETRY_DELAY_S, Settle, retry_delay_s, settle


class _Model(BaseModel):
    n: int


def _validation_error() -> ValidationError:
    with pytest.raises(ValidationError) as info:
        _Model.model_validate({"n": "x"})
    return info.value


@pytest.mark.parametrize("exc", [Unavailable("store down"), Timeout("kv slow")])
def test_a_retryable_failure_is_retried_until_max_deliver_then_dead_lettered(exc: EngramError) -> None:
    """Unavailable and Timeout failures are retried while deliveries are below max_deliver and dead-lettered from then
    on."""
    assert [settle(exc, deliveries, max_deliver=3) for deliveries in (1, 2, 3, 4)] == [
        Settle.RETRY, Settle.RETRY, Settle.DEAD_LETTER, Settle.DEAD_LETTER]


@pytest.mark.parametrize("exc", [InvalidRequest("bad"), Forbidden("other tenant"), NotFound("gone"),
                                 EngramError("internal"), RuntimeError("bug"), _validation_error(),
                                 json.JSONDecodeError("x", "{", 0)])
def test_what_retrying_cannot_fix_is_dead_lettered_at_once(exc: Exception) -> None:
    """Invalid, forbidden, not-found, internal, unexpected, validation and JSON-decoding failures are dead-lettered on
    the first delivery."""
    assert settle(exc, 1, max_deliver=5) is Settle.DEAD_LETTER


def test_back_pressure_waits_however_many_deliveries_it_takes() -> None:
    """Busy is a retryable unavailable error, and it is retried however many deliveries it has had, even past
    max_deliver."""
    busy = Busy("conversation has 32 windows waiting")
    assert busy.code == "unavailable" and busy.retryable
    assert all(settle(busy, deliveries, max_deliver=5) is Settle.RETRY for deliveries in (1, 5, 6, 100, 10_000))


def test_retry_delays_grow_and_are_capped() -> None:
    """Retry delays start at one second, double per delivery, never shrink, and stop growing at MAX_RETRY_DELAY_S."""
    delays = [retry_delay_s(n) for n in (0, 1, 2, 3, 6, 7, 100, 10**9)]
    assert delays[:5] == [1.0, 1.0, 2.0, 4.0, 30.0] and max(delays) == MAX_RETRY_DELAY_S
    assert delays == sorted(delays)


@pytest.mark.parametrize("exc", [Unavailable("store down"), Timeout("kv slow")])
def test_an_accepted_window_waits_out_an_outage_however_long(exc: EngramError) -> None:
    """A sealed window whose write fails because a dependency is down is retried for ever, never dead-lettered."""
    assert all(settle(exc, n, max_deliver=3, accepted=True) is Settle.RETRY for n in (1, 3, 4, 100, 10_000))


@pytest.mark.parametrize("exc", [InvalidRequest("bad"), EngramError("internal"), RuntimeError("bug")])
def test_an_accepted_window_that_fails_otherwise_is_retried_up_to_max_deliver(exc: Exception) -> None:
    """A sealed window's turns were valid when accepted: a failure retrying may not fix still gets max_deliver
    attempts before they are dead-lettered."""
    assert [settle(exc, n, max_deliver=3, accepted=True) for n in (1, 2, 3, 4)] == [
        Settle.RETRY, Settle.RETRY, Settle.DEAD_LETTER, Settle.DEAD_LETTER]
