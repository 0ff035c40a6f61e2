"""Fairness between tenants on one retriever: each tenant waits its turn in a queue of its own.

A handler has `workers` requests in progress at once. A tenant may hold only its share of them (`limit`); its
requests beyond that wait in the tenant's own first-in-first-out queue, and each worker that frees goes to the next
tenant in turn (round robin over the tenants that wait), so a tenant sending many requests at once is served in
order instead of racing its own retries, and another tenant's request still finds a worker free or is next in
line. Only a full queue (`queue` requests of that tenant already waiting) or a wait longer than `max_wait_s` is
answered `unavailable` with a retry hint: the bound keeps a flood's memory and its latency finite.

A waiting request costs a coroutine, not a worker: the subscriber admits `workers + admitted` messages at once
(`admitted`, below), so waiting requests never keep another tenant's message from reaching its turn.
"""
import asyncio
import math
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from shared.errors import OverShare
from shared.runtime import metrics


def tenant_limit(workers: int, share: float) -> int:
    """The requests one tenant may have in progress on a handler with `workers` workers: its share, at least one."""
    return max(1, math.floor(workers * share + 1e-9))  # 1e-9: 0.3 * 10 is 2.9999999999999996


def admitted(workers: int, queue: int) -> int:
    """Messages a subscriber should take at once: the workers, and room for four tenants' full queues."""
    return workers + 4 * queue


class FairQueue:
    """Per-tenant queues in front of one handler's workers, served round robin, each tenant within its share.

    Used from one event loop: nothing awaits between a check and its count, so no lock is needed. Only tenants with
    a request in progress or waiting are kept, so the tables never grow past the requests admitted.
    """

    def __init__(self, kind: str, workers: int, share: float, queue: int, max_wait_s: float) -> None:
        """
        Args:
            kind: what the handler answers (`recall`, `entries`): the metric's label and the refusal's wording.
            share: the fraction of `workers` one tenant may hold (ENGRAM_RECALL_TENANT_SHARE); 1 is no limit.
            queue: requests of one tenant that may wait for a worker (ENGRAM_RECALL_TENANT_QUEUE).
            max_wait_s: the longest a request waits before it is answered `unavailable`.
        """
        self.kind = kind
        self.workers = workers
        self.share = share
        self.limit = tenant_limit(workers, share)
        self.queue = queue
        self.max_wait_s = max_wait_s
        self._running: dict[str, int] = {}
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}  # in the order tenants are next served
        self._total = 0

    @asynccontextmanager
    async def turn(self, tenant: str) -> AsyncIterator[None]:
        """Hold a worker for one request of the tenant, after waiting in its queue if it has no share left.

        Raises:
            OverShare: the tenant's queue is full, or the request waited `max_wait_s` (a retry later will pass).
        """
        if self._free_for(tenant) and not self._waiting.get(tenant):
            self._start(tenant)
        else:
            await self._wait(tenant)
        try:
            yield
        finally:
            self._finish(tenant)

    def _free_for(self, tenant: str) -> bool:
        return self._total < self.workers and self._running.get(tenant, 0) < self.limit

    def _start(self, tenant: str) -> None:
        self._running[tenant] = self._running.get(tenant, 0) + 1
        self._total += 1

    def _finish(self, tenant: str) -> None:
        left = self._running[tenant] - 1
        if left:
            self._running[tenant] = left
        else:
            del self._running[tenant]
        self._total -= 1
        self._dispatch()

    def _refuse(self, tenant: str, why: str) -> OverShare:
        metrics.tenant_limited_total.labels(self.kind).inc()
        return OverShare(f"tenant {tenant!r} {why} on this retriever (its share of the {self.workers} workers: "
                         f"{self.limit}, ENGRAM_RECALL_TENANT_SHARE={self.share:g}); retry shortly, or send fewer "
                         f"at once")

    async def _wait(self, tenant: str) -> None:
        queued = len(self._waiting.get(tenant, ()))
        if queued >= self.queue:
            raise self._refuse(tenant, f"already has {queued} {self.kind} requests waiting "
                                       f"(ENGRAM_RECALL_TENANT_QUEUE={self.queue})")
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, deque()).append(turn)
        try:
            await asyncio.wait_for(asyncio.shield(turn), self.max_wait_s)
        except BaseException as exc:
            if turn.done() and not turn.cancelled():  # the worker was given as the wait ended: pass it on
                self._finish(tenant)
            turn.cancel()
            self._forget(tenant, turn)
            if isinstance(exc, TimeoutError):
                raise self._refuse(tenant, f"waited {self.max_wait_s:g} s for a worker") from None
            raise

    def _forget(self, tenant: str, turn: asyncio.Future[None]) -> None:
        waiters = self._waiting.get(tenant)
        if waiters is not None and turn in waiters:
            waiters.remove(turn)
            if not waiters:
                del self._waiting[tenant]

    def _dispatch(self) -> None:
        """Give free workers to waiting requests: the next tenant in turn that is within its share, first come first
        served within a tenant; a tenant served goes to the back of the line."""
        while self._total < self.workers:
            tenant = next((t for t in self._waiting if self._running.get(t, 0) < self.limit), None)
            if tenant is None:
                return
            waiters = self._waiting.pop(tenant)
            turn = waiters.popleft()
            if waiters:
                self._waiting[tenant] = waiters  # back of the line
            self._start(tenant)  # a request that gave up left its queue (_wait): every turn here still waits
            turn.set_result(None)
