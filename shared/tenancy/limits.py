"""The requests a tenant may make: only a tenant engram serves, and within its request rates.

Checked before a request is handled, in the one middleware every request-reply handler runs under
(shared/messaging/replies.py): a refusal is the tenant's alone, `forbidden` for a tenant the registry does not list,
`unavailable` with a retry hint for one over its rate (the clients wait that long and ask again).
"""
from engram_client.errors import Forbidden, Unavailable
from shared.runtime import metrics
from shared.tenancy.known import KnownTenants
from shared.tenancy.rates import TokenBuckets


class OverRate(Unavailable):
    """The tenant is over its request rate; the same request after `retry_after_s` passes."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RequestLimits:
    """Per-tenant request rates of one process: recall has its own, the other requests share one."""

    def __init__(self, tenants: KnownTenants) -> None:
        self.tenants = tenants
        self._recalls = TokenBuckets(lambda t: (tenants.of(t).recall_per_s, tenants.of(t).recall_burst))
        self._others = TokenBuckets(lambda t: (tenants.of(t).requests_per_s, tenants.of(t).requests_burst))

    def check(self, tenant: str, kind: str) -> None:
        """Let a request of `kind` from `tenant` through, or refuse it.

        Raises:
            Forbidden: the registry does not list the tenant.
            OverRate: the tenant is over its rate for this kind of request.
        """
        if not self.tenants.served(tenant):
            raise Forbidden(f"tenant {tenant!r} is not registered with engram")
        quota = "recall" if kind == "recall" else "requests"
        wait_s = (self._recalls if quota == "recall" else self._others).try_take(tenant)
        if wait_s > 0:
            metrics.quota_refusals_total.labels(quota).inc()
            rate = self.tenants.of(tenant)
            per_s = rate.recall_per_s if quota == "recall" else rate.requests_per_s
            raise OverRate(f"tenant {tenant!r} is over its {quota} rate of {per_s:g} per second; ask again in "
                           f"{wait_s:.2f} s", retry_after_s=wait_s)
