"""Consolidator: the schedule, `<prefix>.<tenant>.forget` and `.consolidate`, and `engram rebuild`, in a queue group."""
import asyncio
from dataclasses import dataclass, field

from faststream.nats import NatsMessage, NatsRouter

from engram_client import subjects
from engram_client.contract import ConsolidateRequest, Forget, RebuildRequest, check_tenant
from engram_client.errors import Unavailable
from services.consolidator.deps import ConsolidatorDeps
from shared.consolidation.schedule import measured
from shared.messaging import replies
from shared.rebuild.run import announce_forget, rebuild
from shared.runtime import metrics
from shared.settings import Settings
from shared.tracing import requests as traced

QUEUE = "consolidator"


@dataclass
class Consolidator:
    """One replica: its handlers on the broker and its share of the schedule."""

    deps: ConsolidatorDeps
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start answering and scheduling."""
        await self.deps.broker.start()
        self._task = asyncio.create_task(self.deps.scheduler.run(self._stopping), name="consolidation-schedule")

    async def stop(self) -> None:
        """Stop scheduling (a run in progress is cancelled; the next run finishes its work)."""
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def build_consolidator(settings: Settings, deps: ConsolidatorDeps) -> Consolidator:
    """Attach the consolidator's handlers to the broker its caller opened (and starts through the result)."""
    router = NatsRouter(middlewares=[*traced.middlewares(settings.subject_prefix), replies.middleware("consolidator")])

    @router.subscriber(subjects.nats_wildcard(subjects.forget(settings.subject_prefix)), queue=QUEUE,
                       decoder=replies.raw_body)
    async def on_forget(msg: NatsMessage) -> bytes:
        request = Forget.model_validate_json(msg.body)  # so bad JSON is reported as such
        tenant = replies.tenant_of(msg)
        check_tenant(request, tenant)
        # Under the tenant's lease: a consolidation running meanwhile could write back a profile built from
        # facts this request deletes.
        result = await deps.leases.run(tenant, lambda: deps.forget(tenant, request),
                                       wait_s=settings.lease_ttl_s)
        if result is None:
            raise Unavailable(f"a consolidation of tenant {tenant!r} has held its lease for over "
                              f"{settings.lease_ttl_s:g} s; ask again later")
        for place, count in result.deleted.model_dump().items():
            metrics.forgotten_total.labels(place).inc(count)
        await announce_forget(deps.broker.connection, settings.subject_prefix, tenant, request)  # for a rebuild
        return replies.encode(result)

    @router.subscriber(subjects.nats_wildcard(subjects.consolidate(settings.subject_prefix)), queue=QUEUE,
                       decoder=replies.raw_body)
    async def on_consolidate(msg: NatsMessage) -> bytes:
        request = ConsolidateRequest.model_validate_json(msg.body)
        tenant = replies.tenant_of(msg)
        check_tenant(request, tenant)
        summary = await deps.leases.run(tenant, lambda: measured(deps.consolidation, tenant, request, "request"),
                                        wait_s=settings.lease_ttl_s)
        if summary is None:
            raise Unavailable(f"another replica has been consolidating tenant {tenant!r} for over "
                              f"{settings.lease_ttl_s:g} s; ask again later")
        return replies.encode(summary)

    @router.subscriber(subjects.rebuild(settings.subject_prefix), queue=QUEUE, decoder=replies.raw_body)
    async def on_rebuild(msg: NatsMessage) -> bytes:
        request = RebuildRequest.model_validate_json(msg.body)
        return replies.encode(await rebuild(deps.for_rebuild(), request))

    deps.broker.include_router(router)
    return Consolidator(deps)

