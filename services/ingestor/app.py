"""Ingestor: consumes `<prefix>.<tenant>.turns|flush` into working memory and writes closed windows as entries."""
import asyncio
from dataclasses import dataclass, field

from services.ingestor.deps import IngestorDeps
from shared.ingest.accept import receive
from shared.ingest.closer import WindowCloser
from shared.ingest.policy import CloserPolicy, WindowPolicy
from shared.messaging import deadletter, events, streams
from shared.messaging.consumer import PullConsumer
from shared.runtime.health import Health
from shared.settings import Settings


@dataclass
class Ingestor:
    """One replica: a pull loop over the durable consumer all replicas share, and a window closer."""

    consumer: PullConsumer
    closer: WindowCloser
    _closer_task: "asyncio.Task[None] | None" = field(default=None, repr=False)

    async def start(self, health: Health) -> None:
        """Start consuming and closing windows; if either loop ever ends on its own, the process fails."""
        health.watch(await self.consumer.start(), "the ingestor's turns consumer", self.consumer.stopping)
        self._closer_task = asyncio.create_task(self.closer.run(self.consumer.stopping), name="closer")
        health.watch(self._closer_task, "the ingestor's window closer", self.consumer.stopping)

    async def stop(self) -> None:
        """Stop consuming, then write what this replica sealed; open turns stay in working memory."""
        await self.consumer.stop()
        self.closer.wake()
        if self._closer_task is not None:
            await asyncio.gather(self._closer_task, return_exceptions=True)
        await self.closer.drain()


def build(settings: Settings, deps: IngestorDeps) -> Ingestor:
    """Wire an ingestor around dependencies its caller has already opened (started by the result's start)."""
    prefix = settings.subject_prefix
    policy = WindowPolicy.from_settings(settings)
    closer = WindowCloser(deps.working_memory, deps.writer, events.publisher(deps.nc, prefix),
                          deadletter.turn_dead_letters(deps.js, prefix, "closer"), CloserPolicy.from_settings(settings))

    async def on_message(tenant: str, kind: str, body: bytes, seq: int) -> None:
        await receive(closer, tenant=tenant, kind=kind, body=body, seq=seq, policy=policy)

    settler = deadletter.Settler("ingestor", prefix, settings.max_deliver, deps.js, deps.name)
    consumer = PullConsumer(deps.js, streams.turns_stream(prefix),
                            streams.ingestor_consumer(prefix, settings.ack_wait_s), settler, on_message,
                            settings.fetch_batch)
    return Ingestor(consumer, closer)
