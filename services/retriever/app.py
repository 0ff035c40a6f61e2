"""Retriever: answers `<prefix>.<tenant>.recall` and `<prefix>.<tenant>.entries` in a queue group."""
from dataclasses import dataclass

from faststream.nats import NatsMessage, NatsRouter

from engram_client import subjects
from services.retriever.deps import RetrieverDeps
from shared.messaging import replies
from shared.retrieval.fairness import FairQueue, admitted
from shared.retrieval.serving import entries_in_turn, recall_in_turn
from shared.runtime.health import Health
from shared.settings import Settings
from shared.tenancy.known import KnownTenants
from shared.tenancy.limits import RequestLimits
from shared.tracing import requests as traced

QUEUE = "retriever"


@dataclass
class Retriever:
    """One replica: its handlers on the broker."""

    deps: RetrieverDeps

    async def start(self, health: Health) -> None:
        """Start answering (FastStream runs the handlers; their failures are replies, never the process's)."""
        await self.deps.broker.start()

    async def stop(self) -> None:
        """Nothing to stop of its own: the subscriptions end when its dependencies close the broker."""


def build(settings: Settings, deps: RetrieverDeps) -> Retriever:
    """Attach the retriever's handlers to the broker its caller opened (started by the result's start)."""
    prefix = settings.subject_prefix
    limits = RequestLimits(KnownTenants.from_settings(settings))
    router = NatsRouter(middlewares=[*traced.middlewares(prefix), replies.middleware("retriever", limits)])
    # A tenant over its share of a handler's workers waits in its own queue (fairness.py), so one tenant's flood
    # cannot hold them all, and its own requests are served in order; the subscriber admits the waiting ones too.
    recalls, lookups = (FairQueue(kind, settings.recall_workers, settings.recall_tenant_share,
                                  settings.recall_tenant_queue, settings.recall_queue_wait_s)
                        for kind in ("recall", "entries"))
    workers = admitted(settings.recall_workers, settings.recall_tenant_queue)

    @router.subscriber(subjects.nats_wildcard(subjects.recall(prefix)), queue=QUEUE,
                       max_workers=workers, decoder=replies.raw_body)
    async def on_recall(msg: NatsMessage) -> bytes:
        return replies.encode(await recall_in_turn(recalls, deps.retrieval, deps.working_memory, deps.summarizer,
                                                   replies.tenant_of(msg), msg.body))

    @router.subscriber(subjects.nats_wildcard(subjects.entries(prefix)), queue=QUEUE,
                       max_workers=workers, decoder=replies.raw_body)
    async def on_entries(msg: NatsMessage) -> bytes:
        return replies.encode(await entries_in_turn(lookups, deps.retrieval, replies.tenant_of(msg), msg.body))

    deps.broker.include_router(router)
    return Retriever(deps)
