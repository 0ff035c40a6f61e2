"""Retriever: answers `<prefix>.<tenant>.recall` and `<prefix>.<tenant>.entries` in a queue group."""
import logging
from typing import Annotated

from faststream import Path
from faststream.nats import NatsBroker, NatsRouter

from shared import admin, replies, subjects
from shared.contract import EntriesRequest, EntriesResponse, RecallRequest, RecallResponse
from shared.deps import Deps
from shared.retrieval.answer import answer_recall
from shared.settings import Settings

Tenant = Annotated[str, Path()]
QUEUE = "retriever"


def build_broker(settings: Settings, deps: Deps, nats_url: str) -> NatsBroker:
    """Wire the retriever around dependencies its caller has already opened (its own NATS connection)."""
    prefix = settings.subject_prefix
    router = NatsRouter(middlewares=[replies.middleware("retriever")])

    @router.subscriber(subjects.recall(prefix), queue=QUEUE)
    async def on_recall(request: RecallRequest, tenant: Tenant) -> RecallResponse:
        return await answer_recall(deps.retrieval, deps.wm, tenant, request, settings.recent_turns)

    @router.subscriber(subjects.entries(prefix), queue=QUEUE)
    async def on_entries(request: EntriesRequest, tenant: Tenant) -> EntriesResponse:
        return await admin.entries(deps.store, tenant, request)

    broker = NatsBroker(nats_url, max_reconnect_attempts=-1, log_level=logging.DEBUG)  # access log: debug only
    broker.include_router(router)
    return broker
