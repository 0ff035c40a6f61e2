"""Consolidator: the schedule, `<prefix>.<tenant>.forget`, `.consolidate`, `.export` and `.import`, and
`engram rebuild`, in a queue group."""
import asyncio
from dataclasses import dataclass, field

from faststream.nats import NatsMessage, NatsRouter

from engram_client import subjects
from engram_client.contract import ConsolidateRequest, ExportRequest, Forget, ImportRequest, RebuildRequest
from services.consolidator.deps import ConsolidatorDeps
from shared.consolidation.requests import consolidate_leased, forget_leased
from shared.embedding import embedder_name
from shared.messaging import replies
from shared.rebuild.run import rebuild
from shared.retrieval.fit import REPLY_HEADROOM_BYTES
from shared.runtime.health import Health
from shared.settings import Settings
from shared.tenancy.known import KnownTenants
from shared.tenancy.limits import RequestLimits
from shared.tracing import requests as traced
from shared.transfer import Importing, export_page, import_leased

QUEUE = "consolidator"


@dataclass
class Consolidator:
    """One replica: its handlers on the broker and its share of the schedule."""

    deps: ConsolidatorDeps
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    async def start(self, health: Health) -> None:
        """Start answering and scheduling; if the schedule ever ends on its own, the process fails."""
        await self.deps.broker.start()
        self._task = asyncio.create_task(self.deps.scheduler.run(self._stopping), name="consolidation-schedule")
        health.watch(self._task, "the consolidation schedule", self._stopping)

    async def stop(self) -> None:
        """Stop scheduling (a run in progress is cancelled; the next run finishes its work)."""
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def build(settings: Settings, deps: ConsolidatorDeps) -> Consolidator:
    """Attach the consolidator's handlers to the broker its caller opened (started by the result's start)."""
    limits = RequestLimits(KnownTenants.from_settings(settings))
    router = NatsRouter(middlewares=[*traced.middlewares(settings.subject_prefix),
                                     replies.middleware("consolidator", limits)])
    wait_s = settings.lease_ttl_s

    @router.subscriber(subjects.nats_wildcard(subjects.forget(settings.subject_prefix)), queue=QUEUE,
                       decoder=replies.raw_body)
    async def on_forget(msg: NatsMessage) -> bytes:
        request = replies.parse(Forget, msg.body)  # so bad JSON is reported as such
        return replies.encode(await forget_leased(deps.places, deps.leases, replies.tenant_of(msg), request,
                                                  wait_s=wait_s, announce=deps.announce_forget))

    @router.subscriber(subjects.nats_wildcard(subjects.consolidate(settings.subject_prefix)), queue=QUEUE,
                       decoder=replies.raw_body)
    async def on_consolidate(msg: NatsMessage) -> bytes:
        request = replies.parse(ConsolidateRequest, msg.body)
        return replies.encode(await consolidate_leased(deps.consolidation, deps.leases, replies.tenant_of(msg),
                                                       request, wait_s=wait_s))

    @router.subscriber(subjects.rebuild(settings.subject_prefix), queue=QUEUE, decoder=replies.raw_body)
    async def on_rebuild(msg: NatsMessage) -> bytes:
        request = replies.parse(RebuildRequest, msg.body)
        return replies.encode(await rebuild(deps.for_rebuild(), request))

    @router.subscriber(subjects.nats_wildcard(subjects.export(settings.subject_prefix)), queue=QUEUE,
                       decoder=replies.raw_body)
    async def on_export(msg: NatsMessage) -> bytes:
        request = replies.parse(ExportRequest, msg.body)
        return replies.encode(await export_page(deps.places, replies.tenant_of(msg), request,
                                                deps.broker.connection.max_payload - REPLY_HEADROOM_BYTES,
                                                embedder_name(settings)))

    @router.subscriber(subjects.nats_wildcard(subjects.import_(settings.subject_prefix)), queue=QUEUE,
                       decoder=replies.raw_body)
    async def on_import(msg: NatsMessage) -> bytes:
        request = replies.parse(ImportRequest, msg.body)
        importing = Importing(store=deps.places.store, working_memory=deps.places.working_memory,
                              js=deps.places.js, prefix=settings.subject_prefix, sparse=deps.consolidation.sparse,
                              embedder=deps.embedding.get, embedder_name=embedder_name(settings))
        return replies.encode(await import_leased(importing, deps.leases, replies.tenant_of(msg), request,
                                                  wait_s=wait_s))

    deps.broker.include_router(router)
    return Consolidator(deps)
