"""Circuit breakers: after enough consecutive failed calls the endpoint (or one tenant's calls) is left alone for a
cool-down, then one trial call decides whether it is back."""
import time
from collections.abc import Callable
from typing import Literal

from shared.runtime import metrics

BreakerState = Literal["closed", "open", "half_open"]


class Breaker:
    """Counts consecutive failures; `allow` says whether a call may go out now."""

    def __init__(self, failures: int, cooldown_s: float, clock: Callable[[], float] = time.monotonic,
                 reported: bool = True) -> None:
        """
        Args:
            reported: its state is the process's `engram_llm_breaker_open` (a tenant's own breaker is not).
        """
        self._failures = failures
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._reported = reported
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
        if self._reported:
            metrics.llm_breaker_open.set(0)

    def released(self) -> None:
        """A call ended without saying anything about the endpoint (cancelled, refused for its own sake): a
        half-open trial may be made again; the failure count stays."""
        self._trial_out = False

    def failed(self) -> None:
        """A call failed: open after `failures` in a row, or at once when the half-open trial fails."""
        self._consecutive += 1
        if self._trial_out or self._consecutive >= self._failures:
            self.trip()

    def trip(self) -> None:
        """Open now, for a cool-down."""
        self._opened_at = self._clock()
        self._trial_out = False
        if self._reported:
            metrics.llm_breaker_open.set(1)


class TenantBreakers:
    """A breaker per tenant, and one for the endpoint that one tenant's slow calls alone cannot open.

    Every failure counts on the calling tenant's own breaker, so a tenant whose calls keep failing goes offline alone.
    A failure that speaks of the endpoint (refused, unreachable, rate-limited, a server error, an unreadable answer)
    also counts on the endpoint's breaker, as before. A timeout may speak of the tenant's own windows (long prompts,
    long answers): it counts on the endpoint's breaker only once `failures` consecutive timeouts came from at least two
    tenants, which is what an endpoint that is slow for everyone looks like.
    """

    def __init__(self, failures: int, cooldown_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._failures = failures
        self._cooldown_s = cooldown_s
        self._clock = clock
        self.endpoint = Breaker(failures, cooldown_s, clock)
        self._tenants: dict[str, Breaker] = {}
        self._timeouts: list[tuple[str, float]] = []  # the consecutive timeouts: (tenant, when), oldest first

    def of(self, tenant: str) -> Breaker:
        """The tenant's own breaker."""
        if tenant not in self._tenants:
            if len(self._tenants) > 1024:  # forget the tenants whose breakers are closed
                self._tenants = {t: b for t, b in self._tenants.items() if b.state != "closed"}
            self._tenants[tenant] = Breaker(self._failures, self._cooldown_s, self._clock, reported=False)
        return self._tenants[tenant]

    def allow(self, tenant: str) -> tuple[bool, str]:
        """Whether the tenant's call may go out, and if not, whose breaker is open (`endpoint` or `tenant`)."""
        if not self.of(tenant).allow():
            return False, "tenant"
        if not self.endpoint.allow():
            self.of(tenant).released()
            return False, "endpoint"
        return True, ""

    def succeeded(self, tenant: str) -> None:
        """The tenant's call answered: both its breaker and the endpoint's close."""
        self.of(tenant).succeeded()
        self.reset()

    def reset(self) -> None:
        """Close the endpoint's breaker and forget its timeouts (tenants' own breakers keep their state)."""
        self.endpoint.succeeded()
        self._timeouts.clear()

    def released(self, tenant: str) -> None:
        """The call ended saying nothing about the endpoint."""
        self.of(tenant).released()
        self.endpoint.released()

    def failed(self, tenant: str, timed_out: bool = False) -> None:
        """The tenant's call failed (`timed_out`: it did not answer in time)."""
        self.of(tenant).failed()
        if not timed_out or self.endpoint.state == "half_open":  # a half-open trial's failure reopens it
            self.endpoint.failed()
            return
        now = self._clock()
        # Consecutive timeouts within a cool-down of each other: older ones say nothing about the endpoint now.
        self._timeouts = [(t, at) for t, at in self._timeouts if now - at < self._cooldown_s][-(self._failures - 1):]
        self._timeouts.append((tenant, now))
        if len(self._timeouts) >= self._failures and len({t for t, _ in self._timeouts}) >= 2:
            self.endpoint.trip()
        else:
            self.endpoint.released()
