"""Fairness between tenants on one retriever: a tenant may hold only its share of a handler's workers at once.

The workers of a subscriber are shared by every tenant and take requests in arrival order, so without a cap one
tenant sending many requests at once holds them all and every other tenant's requests wait behind its queue. With
the cap, a request over its tenant's share is answered `unavailable` at once, before any work: it frees its worker
in well under a millisecond instead of holding it, and the flood's surplus drains from the subscription quickly.
"""
import math
from collections.abc import Iterator
from contextlib import contextmanager

from shared.errors import OverShare
from shared.runtime import metrics


def tenant_limit(workers: int, share: float) -> int:
    """The requests one tenant may have in flight on a handler with `workers` workers: its share, at least one."""
    return max(1, math.floor(workers * share + 1e-9))  # 1e-9: 0.3 * 10 is 2.9999999999999996


class TenantShares:
    """Counts each tenant's requests in flight on one handler and refuses one that would exceed the tenant's share.

    Used from one event loop: nothing awaits between the check and the count, so no lock is needed. Only tenants
    with a request in flight are kept, so the table never grows past the handler's workers.
    """

    def __init__(self, kind: str, workers: int, share: float) -> None:
        """
        Args:
            kind: what the handler answers (`recall`, `entries`): the metric's label and the refusal's wording.
            share: the fraction of `workers` one tenant may hold (ENGRAM_RECALL_TENANT_SHARE); 1 is no limit.
        """
        self.kind = kind
        self.workers = workers
        self.share = share
        self.limit = tenant_limit(workers, share)
        self._held: dict[str, int] = {}

    def held(self, tenant: str) -> int:
        """How many of the tenant's requests are in flight now."""
        return self._held.get(tenant, 0)

    @contextmanager
    def hold(self, tenant: str) -> Iterator[None]:
        """Count one request of the tenant while it is handled; raise `Unavailable` at once if it has no share left.

        Raises:
            OverShare: the tenant already has `limit` requests in flight here (a retry shortly will pass).
        """
        held = self._held.get(tenant, 0)
        if held >= self.limit:
            metrics.tenant_limited_total.labels(self.kind).inc()
            raise OverShare(f"tenant {tenant!r} already has {held} {self.kind} requests in flight on this "
                              f"retriever, its share of the {self.workers} workers (ENGRAM_RECALL_TENANT_SHARE="
                              f"{self.share:g}); retry shortly, or send fewer at once")
        self._held[tenant] = held + 1
        try:
            yield
        finally:
            left = self._held[tenant] - 1
            if left:
                self._held[tenant] = left
            else:
                del self._held[tenant]
