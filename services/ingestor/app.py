"""Ingestor: consumes `<prefix>.<tenant>.turns|flush` and turns closed windows into memory entries.

The durable pull consumer is driven with nats-py directly: FastStream 0.7's pull loop drops a partly fetched batch
when nats-py signals its timeout with asyncio's TimeoutError (it only catches nats' own), so those turns would
wait a whole ack_wait before redelivery. Here every fetched batch is settled, in stream order, by shared.deadletter.
"""
import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from shared import deadletter, streams
from shared.closer import CloserPolicy, WindowCloser
from shared.deps import Deps
from shared.ingest import WindowPolicy, accept
from shared.settings import Settings

log = logging.getLogger("engram.ingestor")
DURABLE = "ingestor"


def consumer_config(settings: Settings) -> ConsumerConfig:
    """The one durable consumer all ingestor replicas share, over turns and flushes."""
    return ConsumerConfig(
        durable_name=DURABLE, ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL,
        filter_subjects=streams.turns_subjects(settings.subject_prefix), ack_wait=settings.ack_wait_s,
        # One delivery more than we retry, so the last failure is dead-lettered by us, not dropped by the server.
        max_deliver=settings.max_deliver + 1, max_ack_pending=10_000)


def build_closer(settings: Settings, deps: Deps) -> WindowCloser:
    """The window closer this replica runs beside its consumer."""
    return WindowCloser(deps.wm, deps.writer, deps.nc, settings.subject_prefix, CloserPolicy(
        idle_timeout_s=settings.idle_timeout_s, sweep_interval_s=settings.sweep_interval_s,
        seal_grace_s=settings.seal_grace_s))


@dataclass
class Ingestor:
    """One ingestor replica: a pull loop over the shared durable consumer, and a window closer."""

    settings: Settings
    deps: Deps
    closer: WindowCloser
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _subscription: JetStreamContext.PullSubscription | None = None
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    handled: int = 0  # messages this replica applied (for logs and tests)

    async def start(self) -> None:
        """Create (or update) the durable consumer and start consuming and closing windows."""
        prefix = self.settings.subject_prefix
        await self.deps.js.add_consumer(streams.turns_stream(prefix), consumer_config(self.settings))
        subscription = self._subscription = await self.deps.js.pull_subscribe_bind(
            DURABLE, stream=streams.turns_stream(prefix))
        policy = WindowPolicy(window_turns=self.settings.window_turns, recent_turns=self.settings.recent_turns,
                              max_pending_windows=self.settings.max_pending_windows)
        settler = deadletter.Settler("ingestor", prefix, self.settings.max_deliver, self.deps.js)

        async def handle(tenant: str, kind: str, body: bytes, seq: int) -> None:
            buffer = await accept(self.deps.wm, tenant=tenant, kind=kind, body=body, seq=seq, policy=policy)
            self.handled += 1
            if buffer.sealed:
                self.closer.notify(tenant, buffer.conversation_id)

        async def pull() -> None:
            # A stop flag, not only cancellation: nats-py's fetch can turn a cancel into a timeout.
            while not self._stopping.is_set():
                try:
                    batch = await subscription.fetch(self.settings.fetch_batch, timeout=1.0)
                except (NatsTimeout, TimeoutError):
                    continue
                except Exception:  # a reconnect or a server hiccup: unacked messages come back later
                    log.exception("fetching turns failed; retrying")
                    await asyncio.sleep(1.0)
                    continue
                await settler.run(batch, handle)

        self._tasks = [asyncio.create_task(pull(), name="ingestor-pull"),
                       asyncio.create_task(self.closer.run(self._stopping), name="ingestor-closer")]

    async def stop(self) -> None:
        """Stop consuming, then write every window this replica can see sealed; open turns stay in the KV."""
        self._stopping.set()
        self.closer.wake()
        _, still_running = await asyncio.wait(self._tasks, timeout=5.0)
        for task in still_running:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._subscription is not None:
            with contextlib.suppress(Exception):
                await self._subscription.unsubscribe()
        with contextlib.suppress(Exception):
            await self.closer.write_pending(await self.closer.wm.conversations(), min_age_s=0.0)
