"""A durable JetStream pull consumer driven with nats-py: fetch a batch, settle every message, never stop early.

FastStream 0.7's pull loop drops a partly fetched batch when nats-py signals its timeout with asyncio's TimeoutError
(it only catches nats' own), so those messages would wait a whole ack_wait before redelivery; this loop settles
every fetched message, in stream order, through shared.messaging.deadletter.
"""
import asyncio
import contextlib
import logging

from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig

from shared.messaging.deadletter import Handler, Settler
from shared.runtime import metrics

log = logging.getLogger("engram.consumer")
LAG_INTERVAL_S = 5.0  # how often a replica reads its consumer's pending and redelivered counts from JetStream


class PullConsumer:
    """One replica's loop over a durable consumer that every replica shares (each message goes to one of them)."""

    def __init__(self, js: JetStreamContext, stream: str, config: ConsumerConfig, settler: Settler,
                 handle: Handler, batch: int) -> None:
        self._js = js
        self._stream = stream
        self._config = config
        self._settler = settler
        self._handle = handle
        self._batch = batch
        self._subscription: JetStreamContext.PullSubscription | None = None
        self.stopping = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self._lag: asyncio.Task[None] | None = None

    async def start(self) -> "asyncio.Task[None]":
        """Create (or update) the durable consumer and start pulling; returns the loop's task."""
        assert self._config.durable_name is not None
        await self._js.add_consumer(self._stream, self._config)
        self._subscription = await self._js.pull_subscribe_bind(self._config.durable_name, stream=self._stream)
        self.task = asyncio.create_task(self._loop(self._subscription), name=f"consumer-{self._config.durable_name}")
        self._lag = asyncio.create_task(self._report_lag(self._config.durable_name), name="consumer-lag")
        return self.task

    async def _report_lag(self, durable: str) -> None:
        """Export what JetStream says of the consumer: not yet delivered, unacknowledged, delivered again."""
        while not self.stopping.is_set():
            try:
                info = await self._js.consumer_info(self._stream, durable)
            except Exception as exc:  # NATS away: the gauges keep their last reading until it is back
                log.debug("reading %s's consumer info failed: %s", durable, exc)
            else:
                metrics.consumer_pending.labels(durable).set(info.num_pending or 0)
                metrics.consumer_ack_pending.labels(durable).set(info.num_ack_pending or 0)
                metrics.consumer_redelivered.labels(durable).set(info.num_redelivered or 0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), LAG_INTERVAL_S)

    async def _loop(self, subscription: JetStreamContext.PullSubscription) -> None:
        # A stop flag, not only cancellation: nats-py's fetch can turn a cancel into a timeout.
        while not self.stopping.is_set():
            try:
                batch = await subscription.fetch(self._batch, timeout=1.0)
            except (NatsTimeout, TimeoutError):
                continue
            except Exception as exc:  # a reconnect or a server hiccup: unacked messages come back later
                log.warning("fetching from %s failed (%s: %s); retrying in 1 s", self._stream, type(exc).__name__, exc)
                await asyncio.sleep(1.0)
                continue
            await self._settler.run(batch, self._handle)

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Finish the batch in hand (up to `timeout_s`), then stop; unacked messages go to another replica."""
        self.stopping.set()
        if self._lag is not None:
            self._lag.cancel()
            await asyncio.gather(self._lag, return_exceptions=True)
        if self.task is not None:
            _, pending = await asyncio.wait([self.task], timeout=timeout_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self._subscription is not None:
            with contextlib.suppress(Exception):
                await self._subscription.unsubscribe()
