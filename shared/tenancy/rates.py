"""Request and ingest rates per tenant: a token bucket each, refilled at the tenant's rate up to its burst.

A request over its tenant's rate is refused with the wait after which it would pass (the reply's retry hint); a
tenant's turns beyond its ingest rate wait in its own stream, where they hold nothing another tenant needs. Buckets
are per process, so a rate is per replica. A bucket idle long enough to be full again is dropped, so the table holds
only the tenants active in the last few seconds.
"""
import time
from collections.abc import Callable
from dataclasses import dataclass

Rate = tuple[float, int]  # (per second, burst)


@dataclass
class _Bucket:
    tokens: float
    at: float


class TokenBuckets:
    """One token bucket per tenant, its rate and burst read from `rate_of` at each use (a changed quota applies at
    once)."""

    def __init__(self, rate_of: Callable[[str], Rate], clock: Callable[[], float] = time.monotonic) -> None:
        self._rate_of = rate_of
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def _refilled(self, tenant: str, now: float) -> tuple[_Bucket, float, int]:
        per_s, burst = self._rate_of(tenant)
        bucket = self._buckets.get(tenant) or _Bucket(tokens=float(burst), at=now)
        bucket.tokens = min(float(burst), bucket.tokens + (now - bucket.at) * per_s)
        bucket.at = now
        return bucket, per_s, burst

    def try_take(self, tenant: str, n: int = 1) -> float:
        """Take `n` tokens if the bucket has them: 0.0; else take nothing and return the seconds until it would."""
        now = self._clock()
        bucket, per_s, _ = self._refilled(tenant, now)
        if bucket.tokens >= n:
            bucket.tokens -= n
            self._keep(tenant, bucket, now)
            return 0.0
        self._keep(tenant, bucket, now)
        return (n - bucket.tokens) / per_s

    def take(self, tenant: str, n: int) -> float:
        """Take `n` tokens, going into debt if need be; return how long to wait until the debt is paid (0.0: none)."""
        now = self._clock()
        bucket, per_s, _ = self._refilled(tenant, now)
        bucket.tokens -= n
        self._keep(tenant, bucket, now)
        return max(0.0, -bucket.tokens / per_s)

    def _keep(self, tenant: str, bucket: _Bucket, now: float) -> None:
        self._buckets[tenant] = bucket
        if len(self._buckets) > 1024:  # drop the buckets that are full again: they would start full anyway
            for name in [t for t in self._buckets if t != tenant and self._full(t, now)]:
                del self._buckets[name]

    def _full(self, tenant: str, now: float) -> bool:
        per_s, burst = self._rate_of(tenant)
        bucket = self._buckets[tenant]
        return bucket.tokens + (now - bucket.at) * per_s >= burst

    def tenants(self) -> int:
        """How many buckets are held (for tests)."""
        return len(self._buckets)
