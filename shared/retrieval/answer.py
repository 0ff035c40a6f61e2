"""A recall request answered in full: the retrieval path plus the conversation's working memory."""
import time

from shared.contract import RecallRequest, RecallResponse, Turn, check_tenant
from shared.ingest.working_memory import WorkingMemory
from shared.retrieval.recall import Retrieval, recall
from shared.runtime import metrics


async def recent_turns(working_memory: WorkingMemory, tenant: str, request: RecallRequest, keep: int) -> list[Turn]:
    """The conversation's last `keep` turns, scoped like every store read: within the tenant, and to the request's
    user when it names one (another user's turns in that conversation are never returned)."""
    if not (request.include_working_memory and request.conversation_id and keep):
        return []
    buffer = await working_memory.get(tenant, request.conversation_id)
    if buffer is None:
        return []
    wanted = [r.seq for r in buffer.recent[-keep:]]
    texts = await working_memory.turns(tenant, request.conversation_id, wanted)
    turns = [texts[seq] for seq in wanted if seq in texts]
    if request.user_id is not None:
        turns = [t for t in turns if t.user_id == request.user_id]
    return turns


async def answer_recall(retrieval: Retrieval, working_memory: WorkingMemory, tenant: str,
                        request: RecallRequest) -> RecallResponse:
    """Check the tenant, fetch the conversation's last turns when asked, and run recall."""
    check_tenant(request, tenant)
    started = time.perf_counter()
    recent = await recent_turns(working_memory, tenant, request, retrieval.settings.recent_turns)
    reply = await recall(retrieval, tenant, request, working_memory=recent)
    metrics.recall_seconds.labels(request.mode).observe(time.perf_counter() - started)
    return reply
