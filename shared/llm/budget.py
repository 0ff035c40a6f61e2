"""Tokens per tenant: what each tenant spent with the chat model this clock hour (its budget) and in all (cost)."""
import time
from collections import defaultdict
from collections.abc import Callable

from shared.errors import LlmUnavailable
from shared.llm.schemas import Purpose

HOUR_S = 3600


class TokenLedger:
    """Counts tokens per tenant and purpose in this process; a tenant past `per_hour` this hour is refused.

    The budget is per process: with N replicas calling the model, a tenant can spend up to N budgets an hour.
    """

    def __init__(self, per_hour: int | None, clock: Callable[[], float] = time.time) -> None:
        self._per_hour = per_hour
        self._clock = clock
        self._hour = -1
        self._this_hour: dict[str, int] = defaultdict(int)
        self.total: dict[tuple[str, Purpose], int] = defaultdict(int)  # (tenant, purpose) -> tokens, all time

    def _roll(self) -> None:
        hour = int(self._clock() // HOUR_S)
        if hour != self._hour:
            self._hour = hour
            self._this_hour.clear()

    def spent(self, tenant: str) -> int:
        """Tokens the tenant spent this clock hour."""
        self._roll()
        return self._this_hour.get(tenant, 0)

    def check(self, tenant: str) -> None:
        """Raise LlmUnavailable('over_budget') when the tenant has used its hour's tokens."""
        if self._per_hour is not None and self.spent(tenant) >= self._per_hour:
            raise LlmUnavailable("over_budget", f"tenant {tenant} used its {self._per_hour} LLM tokens this hour")

    def spend(self, tenant: str, purpose: Purpose, tokens: int) -> None:
        """Record a call's tokens."""
        self._roll()
        self._this_hour[tenant] += tokens
        self.total[(tenant, purpose)] += tokens

    def by_purpose(self, tenant: str | None = None) -> dict[str, int]:
        """All-time tokens per purpose, of one tenant or of all."""
        out: dict[str, int] = defaultdict(int)
        for (who, purpose), count in self.total.items():
            if tenant is None or who == tenant:
                out[purpose] += count
        return dict(out)
