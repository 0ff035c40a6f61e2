"""Ingestor: consumes every tenant's `<prefix>.<tenant>.turns|flush` into working memory and writes closed windows as
entries; makes a tenant's turns stream when its first message arrives."""
import asyncio
from dataclasses import dataclass, field

from services.ingestor.deps import IngestorDeps
from shared.ingest.accept import receive
from shared.ingest.closer import WindowCloser
from shared.ingest.policy import CloserPolicy, WindowPolicy
from shared.messaging import deadletter, events, streams
from shared.messaging.provision import Provisioner
from shared.messaging.turns_consumers import TurnsConsumers
from shared.runtime import metrics
from shared.runtime.health import Health
from shared.settings import Settings
from shared.tenancy.rates import TokenBuckets


@dataclass
class Ingestor:
    """One replica: a pull loop per tenant's turns stream (over durable consumers every replica shares), the
    provisioner of new tenants' streams, and a window closer."""

    consumers: TurnsConsumers
    closer: WindowCloser
    provisioner: Provisioner | None
    _closer_task: "asyncio.Task[None] | None" = field(default=None, repr=False)

    async def start(self, health: Health) -> None:
        """Start consuming, provisioning and closing windows; if a loop ever ends on its own, the process fails."""
        health.watch(await self.consumers.start(), "the ingestor's turns consumers", self.consumers.stopping)
        if self.provisioner is not None:
            await self.provisioner.start(self.consumers.tenants)
        self._closer_task = asyncio.create_task(self.closer.run(self.consumers.stopping), name="closer")
        health.watch(self._closer_task, "the ingestor's window closer", self.consumers.stopping)

    async def stop(self) -> None:
        """Stop provisioning and consuming, then write what this replica sealed; open turns stay in working
        memory."""
        if self.provisioner is not None:
            await self.provisioner.stop()
        await self.consumers.stop()
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

    buckets = TokenBuckets(lambda tenant: (deps.tenants.of(tenant).ingest_per_s,
                                           max(1, round(deps.tenants.of(tenant).ingest_per_s))))

    async def pace(tenant: str, n: int) -> None:
        wait_s = buckets.take(tenant, n)
        if wait_s > 0:  # over its rate: its next turns wait in its own stream, holding nothing of another's
            metrics.ingest_paced_seconds_total.inc(wait_s)
            await asyncio.sleep(wait_s)

    def limits(tenant: str) -> streams.TurnsLimits:
        quota = deps.tenants.of(tenant)
        return streams.TurnsLimits(max_bytes=quota.turns_max_bytes, max_message_bytes=quota.max_payload_bytes)

    async def ensure(tenant: str) -> bool:
        return await streams.ensure_tenant(deps.js, prefix, tenant, limits(tenant), settings.turn_retention_s,
                                           deps.replicas)

    settler = deadletter.Settler("ingestor", prefix, settings.max_deliver, deps.js, deps.name,
                                 attempts=deps.working_memory.attempts)
    consumers = TurnsConsumers(deps.js, deps.nc, prefix, settler, on_message, batch=settings.fetch_batch,
                               ack_wait_s=settings.ack_wait_s,
                               slots=lambda tenant: deps.tenants.of(tenant).max_unacked_turns, pace=pace,
                               limits=limits, ensure=ensure)

    provisioner = None if deps.legacy else Provisioner(deps.nc, prefix, ensure, deps.tenants.served)
    return Ingestor(consumers, closer, provisioner)
