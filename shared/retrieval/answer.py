"""A recall request answered in full: the retrieval path plus the conversation's working memory."""
import time

from shared.contract import RecallRequest, RecallResponse, Turn, check_tenant
from shared.ingest.working_memory import WorkingMemory
from shared.retrieval.recall import Retrieval, recall
from shared.runtime import metrics


async def answer_recall(retrieval: Retrieval, working_memory: WorkingMemory, tenant: str,
                        request: RecallRequest) -> RecallResponse:
    """Check the tenant, fetch the conversation's last turns when asked, and run recall."""
    check_tenant(request, tenant)
    started = time.perf_counter()
    recent: list[Turn] = []
    keep = retrieval.settings.recent_turns
    if request.include_working_memory and request.conversation_id and keep:
        buffer = await working_memory.get(tenant, request.conversation_id)
        recent = buffer.recent[-keep:] if buffer else []
    reply = await recall(retrieval, tenant, request, working_memory=recent)
    metrics.recall_seconds.labels(request.mode).observe(time.perf_counter() - started)
    return reply
