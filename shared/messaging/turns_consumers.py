"""The ingestor's consumers: one pull loop per tenant's turns stream (and the legacy stream while it exists), started
as tenants appear, so each tenant's turns are pulled, paced and held in slots of their own.

A flooding tenant fills its own stream and its own consumer's slots; another tenant's loop pulls its turns all the
same, at once. New streams are learnt from the provisioner's announcement and, in case one was missed (a reconnect),
from a listing of the streams every RELIST_S. Each replica runs the same loops over the same durable consumers, and
JetStream gives each message to one of them.
"""
import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from engram_client import subjects
from shared.messaging import streams
from shared.messaging.consumer import PullConsumer
from shared.messaging.deadletter import Handler, Settler
from shared.messaging.streams import TurnsStream
from shared.runtime import metrics

log = logging.getLogger("engram.consumer")
RELIST_S = 30.0        # how often the streams are listed again (a missed announcement is healed by then)
REPORT_S = 15.0        # how often pending counts and quota use are read from JetStream
NEAR_FULL = 0.9        # a turns stream this full counts in engram_tenants_near_quota

Slots = Callable[[str], int]                      # a tenant's consumer's max_ack_pending
Pace = Callable[[str, int], Awaitable[None]]     # wait before handling a tenant's batch of n
Limits = Callable[[str], streams.TurnsLimits]     # the limits a tenant's stream should have now
Ensure = Callable[[str], Awaitable[bool]]         # bring a tenant's stream to those limits


class TurnsConsumers:
    """One replica's pull loops over every turns stream (see the module doc)."""

    def __init__(self, js: JetStreamContext, nc: Client, prefix: str, settler: Settler, handle: Handler, *,
                 batch: int, ack_wait_s: float, slots: Slots, pace: Pace | None = None,
                 limits: Limits | None = None, ensure: Ensure | None = None) -> None:
        """
        Args:
            limits, ensure: when given, a tenant stream whose wanted limits changed (the registry was edited) is
                brought up to date at the next listing.
        """
        self._js = js
        self._nc = nc
        self.prefix = prefix
        self._settler = settler
        self._handle = handle
        self._batch = batch
        self._ack_wait_s = ack_wait_s
        self._slots = slots
        self._pace = pace
        self._limits = limits
        self._ensure = ensure
        self._applied: dict[str, streams.TurnsLimits] = {}
        self.loops: dict[str, PullConsumer] = {}   # by stream name
        self.tenants: set[str] = set()             # those with a stream of their own
        self.stopping = asyncio.Event()
        self._changed = asyncio.Event()
        self._announced: set[str] = set()
        self.task: asyncio.Task[None] | None = None
        self._report: asyncio.Task[None] | None = None
        self._subscription: Subscription | None = None

    async def start(self) -> "asyncio.Task[None]":
        """Start a loop for every turns stream there is, then follow new ones; returns the supervising task."""
        self._subscription = await self._nc.subscribe(subjects.tenant_streams(self.prefix), cb=self._on_announced)
        await self._sync()
        self.task = asyncio.create_task(self._supervise(), name="turns-consumers")
        self._report = asyncio.create_task(self._report_lag(), name="turns-consumers-report")
        return self.task

    async def _on_announced(self, msg: Msg) -> None:
        self._announced.add(msg.data.decode(errors="replace"))
        self._changed.set()

    async def _supervise(self) -> None:
        while not self.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), RELIST_S)
            self._changed.clear()
            if self.stopping.is_set():
                return
            try:
                await self._sync()
            except Exception as exc:  # NATS away: the loops there keep running, the listing is tried again
                log.warning("listing the turns streams failed (%s: %s); trying again", type(exc).__name__, exc)
                await asyncio.sleep(1.0)

    async def _sync(self) -> None:
        """Start a loop for each stream that has none, and end the loops of streams that are gone."""
        announced, self._announced = self._announced, set()
        present = {s.name: s for s in await streams.every_turns_stream(self._js, self._nc, self.prefix)}
        for tenant in announced - {s.tenant for s in present.values()}:  # made after the listing was read
            found = await streams.holding(self._js, self.prefix, tenant)
            if found is not None:
                present[found.name] = found
        # A loop ends on its own only when its stream went, or by a failure it could not survive: either way it is
        # stopped here and, if the stream is still there, started again below.
        for name in [n for n, loop in self.loops.items()
                     if n not in present or loop.gone.is_set() or (loop.task is not None and loop.task.done())]:
            await self.loops.pop(name).stop()
        for name, stream in present.items():
            if name not in self.loops and not self.stopping.is_set():
                await self._add(stream)
        self.tenants = {s.tenant for s in present.values() if s.tenant is not None}
        await self._bring_up_to_date()
        metrics.tenant_streams.set(sum(1 for s in self.loops.values() if s.stream != streams.legacy_turns_stream(
            self.prefix)))
        metrics.legacy_turns_stream.set(int(streams.legacy_turns_stream(self.prefix) in present))

    async def _bring_up_to_date(self) -> None:
        if self._limits is None or self._ensure is None:
            return
        for tenant in sorted(self.tenants):
            wanted = self._limits(tenant)
            if self._applied.get(tenant) != wanted:
                await self._ensure(tenant)
                self._applied[tenant] = wanted

    async def _add(self, stream: TurnsStream) -> None:
        tenant = stream.tenant
        slots = self._slots(tenant) if tenant is not None else 10_000  # the legacy stream: every tenant's, as before
        config = streams.ingestor_consumer(stream, self._ack_wait_s, slots)
        pace = self._pace

        async def paced(n: int) -> None:
            if pace is not None and tenant is not None:
                await pace(tenant, n)

        loop = PullConsumer(self._js, stream.name, config, self._settler, self._handle, self._batch, paced)
        try:
            await loop.start()
        except Exception as exc:  # deleted meanwhile, or NATS away: the next listing tries again
            log.warning("starting the consumer of %s failed (%s: %s)", stream.name, type(exc).__name__, exc)
            return
        self.loops[stream.name] = loop

    async def _report_lag(self) -> None:
        """Export what JetStream says of the consumers, summed over the tenants, and how many tenants are near
        their storage quota."""
        while not self.stopping.is_set():
            pending = ack_pending = redelivered = near = 0
            for loop in list(self.loops.values()):
                try:
                    info = await self._js.consumer_info(loop.stream, loop.durable)
                    pending += info.num_pending or 0
                    ack_pending += info.num_ack_pending or 0
                    redelivered += info.num_redelivered or 0
                    state = await self._js.stream_info(loop.stream)
                    limit = state.config.max_bytes or -1
                    near += int(limit > 0 and state.state.bytes >= NEAR_FULL * limit)
                except Exception as exc:  # NATS away, or the stream just went: the gauges keep their readings
                    log.debug("reading %s's consumer info failed: %s", loop.stream, exc)
            metrics.consumer_pending.labels(streams.INGESTOR_DURABLE).set(pending)
            metrics.consumer_ack_pending.labels(streams.INGESTOR_DURABLE).set(ack_pending)
            metrics.consumer_redelivered.labels(streams.INGESTOR_DURABLE).set(redelivered)
            metrics.tenants_near_quota.labels("turns_storage").set(near)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), REPORT_S)

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop every loop (each finishes its batch in hand, up to `timeout_s`)."""
        self.stopping.set()
        self._changed.set()
        for task in (self.task, self._report):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._subscription is not None:
            with contextlib.suppress(Exception):
                await self._subscription.unsubscribe()
        await asyncio.gather(*(loop.stop(timeout_s) for loop in self.loops.values()), return_exceptions=True)
