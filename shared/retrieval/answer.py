"""A recall request answered in full: the retrieval path plus the conversation's working memory."""
import time

from shared import metrics
from shared.contract import RecallRequest, RecallResponse, Turn, check_tenant
from shared.retrieval.recall import Retrieval, recall
from shared.working_memory import WorkingMemory


async def answer_recall(retrieval: Retrieval, wm: WorkingMemory, tenant: str, request: RecallRequest,
                        recent_turns: int) -> RecallResponse:
    """Check the tenant, fetch the conversation's last turns when asked, and run recall."""
    check_tenant(request, tenant)
    started = time.perf_counter()
    recent: list[Turn] = []
    if request.include_working_memory and request.conversation_id:
        buffer = await wm.get(tenant, request.conversation_id)
        recent = buffer.recent[-recent_turns:] if buffer and recent_turns else []
    reply = await recall(retrieval, tenant, request, working_memory=recent)
    metrics.recall_seconds.labels(request.mode).observe(time.perf_counter() - started)
    metrics.recall_total.labels("ok").inc()
    return reply
