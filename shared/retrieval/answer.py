"""A recall request answered in full: the retrieval path plus the conversation's working memory."""
import time

from shared.contract import RecallRequest, RecallResponse, Turn, check_tenant
from shared.ingest.working_memory import WorkingMemory
from shared.retrieval.recall import Retrieval
from shared.retrieval.respond import recall
from shared.retrieval.summary import Summarizer
from shared.runtime import metrics


async def recent_turns(working_memory: WorkingMemory, tenant: str, request: RecallRequest, keep: int,
                       summarizer: Summarizer | None = None) -> tuple[list[Turn], str | None]:
    """The conversation's last `keep` turns, scoped like every store read: within the tenant, and to the request's
    user when it names one (another user's turns in that conversation are never returned); with a summarizer, the
    older of them folded into the conversation's running summary once they outgrow its budget."""
    if not (request.include_working_memory and request.conversation_id and keep):
        return [], None
    buffer = await working_memory.get(tenant, request.conversation_id)
    if buffer is None:
        return [], None
    wanted = [r.seq for r in buffer.recent[-keep:]]
    texts = await working_memory.turns(tenant, request.conversation_id, wanted)
    turns = [texts[seq] for seq in wanted if seq in texts]
    mine = [t for t in turns if request.user_id is None or t.user_id == request.user_id]
    if summarizer is None:
        return mine, None
    if len(mine) < len(turns):  # the conversation's summary holds other people's words: summarise these alone
        return summarizer.uncached(mine)
    return await summarizer.apply(tenant, request.conversation_id, turns, request.user_id)


async def answer_recall(retrieval: Retrieval, working_memory: WorkingMemory, tenant: str,
                        request: RecallRequest, summarizer: Summarizer | None = None) -> RecallResponse:
    """Check the tenant, fetch the conversation's last turns when asked, and run recall."""
    check_tenant(request, tenant)
    started = time.perf_counter()
    recent, summary = await recent_turns(working_memory, tenant, request, retrieval.settings.recent_turns,
                                         summarizer)
    reply = await recall(retrieval, tenant, request, working_memory=recent, summary=summary)
    metrics.recall_seconds.labels(request.mode).observe(time.perf_counter() - started)
    return reply
