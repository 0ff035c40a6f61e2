"""A durable JetStream pull consumer driven with nats-py: fetch a batch, settle every message, never stop early.

FastStream 0.7's pull loop drops a partly fetched batch when nats-py signals its timeout with asyncio's TimeoutError
(it only catches nats' own), so those messages would wait a whole ack_wait before redelivery; this loop settles
every fetched message, in stream order, through shared.messaging.deadletter.
"""
import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig
from nats.js.errors import NotFoundError

from shared.messaging.deadletter import Handler, Settler

log = logging.getLogger("engram.consumer")
FETCH_WAIT_S = 5.0  # how long one pull waits on the server for messages (an idle tenant costs a pull this often)

Pace = Callable[[int], Awaitable[None]]  # called with each batch's size before it is handled; may wait


class PullConsumer:
    """One replica's loop over a durable consumer that every replica shares (each message goes to one of them)."""

    def __init__(self, js: JetStreamContext, stream: str, config: ConsumerConfig, settler: Settler,
                 handle: Handler, batch: int, pace: Pace | None = None) -> None:
        self._js = js
        self.stream = stream
        self._config = config
        self._settler = settler
        self._handle = handle
        self._batch = batch
        self._pace = pace
        self._subscription: JetStreamContext.PullSubscription | None = None
        self.stopping = asyncio.Event()
        self.gone = asyncio.Event()  # the stream was deleted (its tenant removed): the loop ended for good
        self.task: asyncio.Task[None] | None = None
        self._handling = False  # a fetched batch is in hand (stop lets it finish; a wait for one it cancels)

    @property
    def durable(self) -> str:
        """The durable consumer's name."""
        assert self._config.durable_name is not None
        return self._config.durable_name

    async def start(self) -> "asyncio.Task[None]":
        """Create (or update) the durable consumer and start pulling; returns the loop's task."""
        await self._js.add_consumer(self.stream, self._config)
        self._subscription = await self._js.pull_subscribe_bind(self.durable, stream=self.stream)
        self.task = asyncio.create_task(self._loop(self._subscription), name=f"consumer-{self.stream}")
        return self.task

    async def _loop(self, subscription: JetStreamContext.PullSubscription) -> None:
        # A stop flag, not only cancellation: nats-py's fetch can turn a cancel into a timeout.
        while not self.stopping.is_set():
            try:
                batch = await subscription.fetch(self._batch, timeout=FETCH_WAIT_S)
            except (NatsTimeout, TimeoutError):
                continue
            except NotFoundError:  # the stream or its consumer is gone: nothing more will come
                log.info("stream %s or its consumer is gone; its loop ends", self.stream)
                self.gone.set()
                return
            except Exception as exc:  # a reconnect or a server hiccup: unacked messages come back later
                log.warning("fetching from %s failed (%s: %s); retrying in 1 s", self.stream, type(exc).__name__, exc)
                await asyncio.sleep(1.0)
                continue
            self._handling = True
            try:
                if self._pace is not None:
                    await self._pace(len(batch))
                await self._settler.run(batch, self._handle)
            finally:
                self._handling = False

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Finish the batch in hand (up to `timeout_s`), then stop; unacked messages go to another replica. A loop
        waiting for its next batch stops at once (nothing is in hand)."""
        self.stopping.set()
        if self.task is not None:
            _, pending = await asyncio.wait([self.task], timeout=timeout_s if self._handling else 0)
            for task in pending:
                task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self._subscription is not None:
            with contextlib.suppress(Exception):
                await self._subscription.unsubscribe()
