"""Consolidator: answers `<prefix>.<tenant>.forget` in a queue group (the consolidation jobs come next)."""
from faststream.nats import NatsMessage, NatsRouter

from shared.consolidation.forget import forget
from shared.contract import Forget
from shared.messaging import replies, subjects
from shared.runtime import metrics
from shared.runtime.consolidator import ConsolidatorDeps
from shared.settings import Settings

QUEUE = "consolidator"


def build_consolidator(settings: Settings, deps: ConsolidatorDeps) -> None:
    """Attach the consolidator's handlers to the broker its caller opened (and will start)."""
    router = NatsRouter(middlewares=[replies.middleware("consolidator")])

    @router.subscriber(subjects.nats_wildcard(subjects.forget(settings.subject_prefix)), queue=QUEUE)
    async def on_forget(msg: NatsMessage) -> bytes:
        request = Forget.model_validate_json(msg.body)  # so bad JSON is reported as such
        result = await forget(deps.places, replies.tenant_of(msg), request)
        for place, count in result.deleted.model_dump().items():
            metrics.forgotten_total.labels(place).inc(count)
        return replies.encode(result)

    deps.broker.include_router(router)
