"""A recall answered: the fast or deep search, the working memory (summarised when long) and a rendered context
that fits both the token budget and the broker's reply size."""
import time
from datetime import datetime

from engram_client.contract import Explanation, RecallRequest, RecallResponse, Turn
from shared.retrieval import render as rendering
from shared.retrieval.deep import deep_search
from shared.retrieval.fit import fit_recall
from shared.retrieval.plan import query_terms
from shared.retrieval.recall import Retrieval, search
from shared.retrieval.views import recalled_entry
from shared.store import ScoredEntry
from shared.tracing import spans


def _matched_terms(text: str, terms: list[str]) -> list[str]:
    lowered = text.lower()
    return [t for t in terms if t in lowered]


async def recall(retrieval: Retrieval, tenant: str, request: RecallRequest, working_memory: list[Turn] | None = None,
                 now: datetime | None = None, summary: str | None = None) -> RecallResponse:
    """Answer a RecallRequest for `tenant`: the hits, the recent turns (after the summary of the turns before
    them, if any), and a context within the token budget."""
    started = time.perf_counter()
    trace = None
    if request.mode == "deep":
        with spans.span("engram.recall deep"):  # its plan rounds, and a search span for each
            searched, trace = await deep_search(retrieval, tenant, request, now)
    else:
        searched = await search(retrieval, tenant, request, now)
    hits, boosts, applied, timings = searched.hits, searched.boosts, searched.applied, searched.timings
    terms = query_terms(request.query) if request.explain else []

    def build(candidates: list[ScoredEntry], recent: list[Turn]) -> RecallResponse:
        context, context_tokens, kept = rendering.render(candidates, recent, request.token_budget,
                                                         retrieval.settings.tokenizer, summary)
        entries = [recalled_entry(h, Explanation(
            dense_rank=h.dense_rank, dense_score=h.dense_score, sparse_rank=h.sparse_rank,
            sparse_score=h.sparse_score, fused_score=h.score, matched_terms=_matched_terms(h.entry.text, terms),
            filters=[f"tenant = {tenant}", *applied], boosts=boosts.get(h.entry.id, []),
            ordering=searched.ordering.get(h.entry.id, []),
        ) if request.explain else None) for h in kept]
        return RecallResponse(entries=entries, working_memory=recent, working_memory_summary=summary,
                              context=context, context_tokens=context_tokens, timings_ms=timings,
                              deep=trace if request.explain else None)

    recent = list(working_memory or []) if request.include_working_memory else []
    summary = summary if request.include_working_memory else None
    with spans.span("engram.recall render"):
        reply = fit_recall(build, hits, recent, retrieval.max_reply_bytes)
    if retrieval.usage is not None:
        retrieval.usage.record(tenant, [e.id for e in reply.entries])
    total = (time.perf_counter() - started) * 1e3
    return reply.model_copy(update={"timings_ms": timings.model_copy(update={"total": total})})
