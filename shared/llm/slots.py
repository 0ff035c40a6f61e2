"""The chat model's call slots of one process, shared fairly: at most `total` calls in flight, and at most `share` of
them one tenant's, so another tenant's call finds a slot while one tenant's slow windows wait for theirs."""
import asyncio
import contextlib
from collections.abc import AsyncIterator


class TenantSlots:
    """Counts the calls in flight, in all and per tenant (only tenants with a call in flight are kept)."""

    def __init__(self, total: int, share: int) -> None:
        self.total = total
        self.share = share
        self._count = 0
        self._in_use: dict[str, int] = {}
        self._changed = asyncio.Condition()

    def in_use(self, tenant: str) -> int:
        """The tenant's calls in flight."""
        return self._in_use.get(tenant, 0)

    @contextlib.asynccontextmanager
    async def hold(self, tenant: str) -> AsyncIterator[None]:
        """Hold a slot for one of the tenant's calls, once one is free within its share."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._count < self.total and self.in_use(tenant) < self.share)
            self._count += 1
            self._in_use[tenant] = self.in_use(tenant) + 1
        try:
            yield
        finally:
            async with self._changed:
                self._count -= 1
                left = self.in_use(tenant) - 1
                if left:
                    self._in_use[tenant] = left
                else:
                    del self._in_use[tenant]
                self._changed.notify_all()
