"""A recall request answered in full: the retrieval path plus the conversation's working memory."""
import time

from shared.contract import RecallRequest, RecallResponse, Turn, check_tenant
from shared.contract.failures import code_of
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
    started = time.perf_counter()
    try:
        check_tenant(request, tenant)
        recent, summary = await recent_turns(working_memory, tenant, request, retrieval.settings.recent_turns,
                                             summarizer)
        remembered = time.perf_counter()
        reply = await recall(retrieval, tenant, request, working_memory=recent, summary=summary)
    except Exception as exc:
        metrics.recall_requests_total.labels(request.mode, code_of(exc)).inc()
        raise
    observe(request, reply, remembered - started, time.perf_counter() - started)
    return reply


def observe(request: RecallRequest, reply: RecallResponse, working_memory_s: float, total_s: float) -> None:
    """Export one answered recall: outcome, time by stage, entries returned (or none), context tokens."""
    mode, timings = request.mode, reply.timings_ms
    metrics.recall_requests_total.labels(mode, "ok").inc()
    metrics.recall_seconds.labels(mode).observe(total_s)
    rest_s = total_s - working_memory_s - (timings.embed + timings.search + timings.plan) / 1e3
    for stage, seconds in (("working_memory", working_memory_s), ("embed", timings.embed / 1e3),
                           ("search", timings.search / 1e3), ("plan", timings.plan / 1e3), ("render", rest_s)):
        if stage != "plan" or mode == "deep":
            metrics.recall_stage_seconds.labels(stage).observe(max(0.0, seconds))
    metrics.recall_entries_returned.labels(mode).observe(len(reply.entries))
    if not reply.entries:
        metrics.recall_empty_total.labels(mode).inc()
    metrics.recall_context_tokens.labels(mode).observe(reply.context_tokens)
