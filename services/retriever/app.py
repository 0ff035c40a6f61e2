"""Retriever: answers `<prefix>.<tenant>.recall` and `<prefix>.<tenant>.entries` in a queue group."""
import logging
from collections import Counter
from typing import Annotated

from faststream import Path
from faststream.nats import NatsBroker, NatsMessage, NatsRouter

from shared import admin, replies, subjects
from shared.contract import EntriesRequest, EntriesResponse, RecallRequest, RecallResponse
from shared.deps import Deps
from shared.retrieval.answer import answer_recall
from shared.settings import Settings

Tenant = Annotated[str, Path()]
QUEUE = "retriever"


def build_broker(settings: Settings, deps: Deps, nats_url: str, served: Counter[str] | None = None) -> NatsBroker:
    """Wire the retriever around dependencies its caller has already opened (its own NATS connection).

    Args:
        served: counts the requests this instance answered, by kind (for logs and tests).
    """
    served = served if served is not None else Counter()
    prefix = settings.subject_prefix
    router = NatsRouter(middlewares=[replies.middleware("retriever")])

    @router.subscriber(subjects.recall(prefix), queue=QUEUE, max_workers=settings.recall_workers)
    async def on_recall(msg: NatsMessage, tenant: Tenant) -> RecallResponse:
        served["recall"] += 1
        request = RecallRequest.model_validate_json(msg.body)  # so bad JSON is reported as such
        return await answer_recall(deps.retrieval, deps.wm, tenant, request, settings.recent_turns)

    @router.subscriber(subjects.entries(prefix), queue=QUEUE, max_workers=settings.recall_workers)
    async def on_entries(msg: NatsMessage, tenant: Tenant) -> EntriesResponse:
        served["entries"] += 1
        return await admin.entries(deps.store, tenant, EntriesRequest.model_validate_json(msg.body))

    broker = NatsBroker(nats_url, max_reconnect_attempts=-1, log_level=logging.DEBUG)  # access log: debug only
    broker.include_router(router)
    return broker
