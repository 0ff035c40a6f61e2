"""Retriever: answers `<prefix>.<tenant>.recall` and `<prefix>.<tenant>.entries` in a queue group."""
from collections import Counter

from faststream.nats import NatsMessage, NatsRouter
from pydantic import ValidationError

from engram_client import subjects
from engram_client.contract import EntriesRequest, RecallRequest
from services.retriever.deps import RetrieverDeps
from shared.messaging import replies
from shared.retrieval.answer import answer_recall
from shared.retrieval.entries import entries
from shared.retrieval.fairness import FairQueue, admitted
from shared.runtime import metrics
from shared.settings import Settings
from shared.tracing import requests as traced

QUEUE = "retriever"


def build_retriever(settings: Settings, deps: RetrieverDeps, served: Counter[str] | None = None) -> None:
    """Attach the retriever's handlers to the broker its caller opened (and will start).

    Args:
        served: counts the requests this instance answered, by kind (for tests).
    """
    served = served if served is not None else Counter()
    prefix = settings.subject_prefix
    router = NatsRouter(middlewares=[*traced.middlewares(prefix), replies.middleware("retriever")])
    # A tenant over its share of a handler's workers waits in its own queue (fairness.py), so one tenant's flood
    # cannot hold them all, and its own requests are served in order; the subscriber admits the waiting ones too.
    recalls, lookups = (FairQueue(kind, settings.recall_workers, settings.recall_tenant_share,
                                  settings.recall_tenant_queue, settings.recall_queue_wait_s)
                        for kind in ("recall", "entries"))
    workers = admitted(settings.recall_workers, settings.recall_tenant_queue)

    @router.subscriber(subjects.nats_wildcard(subjects.recall(prefix)), queue=QUEUE,
                       max_workers=workers, decoder=replies.raw_body)
    async def on_recall(msg: NatsMessage) -> bytes:
        served["recall"] += 1
        tenant = replies.tenant_of(msg)
        async with recalls.turn(tenant):  # before parsing: a refusal costs next to nothing
            try:
                request = RecallRequest.model_validate_json(msg.body)  # so bad JSON is reported as such
            except ValidationError:
                metrics.recall_requests_total.labels("unknown", "invalid_request").inc()
                raise
            return replies.encode(await answer_recall(deps.retrieval, deps.working_memory, tenant, request,
                                                      deps.summarizer))

    @router.subscriber(subjects.nats_wildcard(subjects.entries(prefix)), queue=QUEUE,
                       max_workers=workers, decoder=replies.raw_body)
    async def on_entries(msg: NatsMessage) -> bytes:
        served["entries"] += 1
        tenant = replies.tenant_of(msg)
        async with lookups.turn(tenant):
            request = EntriesRequest.model_validate_json(msg.body)
            return replies.encode(await entries(deps.retrieval.store, tenant, request,
                                                deps.retrieval.max_reply_bytes))

    deps.broker.include_router(router)
