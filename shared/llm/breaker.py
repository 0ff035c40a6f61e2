"""A circuit breaker: after enough consecutive failed calls the endpoint is left alone for a cool-down, then one
trial call decides whether it is back."""
import time
from collections.abc import Callable
from typing import Literal

from shared.runtime import metrics

BreakerState = Literal["closed", "open", "half_open"]


class Breaker:
    """Counts consecutive failures; `allow` says whether a call may go out now."""

    def __init__(self, failures: int, cooldown_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._failures = failures
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._consecutive = 0
        self._opened_at: float | None = None
        self._trial_out = False

    @property
    def state(self) -> BreakerState:
        """Closed (calls go out), open (refused until the cool-down ends) or half-open (one trial call)."""
        if self._opened_at is None:
            return "closed"
        return "open" if self._clock() - self._opened_at < self._cooldown_s else "half_open"

    def allow(self) -> bool:
        """Whether a call may go out; in half-open state only one trial at a time."""
        state = self.state
        if state == "closed":
            return True
        if state == "open" or self._trial_out:
            return False
        self._trial_out = True
        return True

    def succeeded(self) -> None:
        """A call answered: close."""
        self._consecutive = 0
        self._opened_at = None
        self._trial_out = False
        metrics.llm_breaker_open.set(0)

    def released(self) -> None:
        """A call ended without saying anything about the endpoint (cancelled, refused for its own sake): a
        half-open trial may be made again; the failure count stays."""
        self._trial_out = False

    def failed(self) -> None:
        """A call failed: open after `failures` in a row, or at once when the half-open trial fails."""
        self._consecutive += 1
        if self._trial_out or self._consecutive >= self._failures:
            self._opened_at = self._clock()
            self._trial_out = False
            metrics.llm_breaker_open.set(1)
