"""Deep recall: the model plans targeted sub-queries, they run in one batch against the store beside the fast
search, and a bounded number of reflection rounds search for what is missing; a deadline bounds it all, and past
it the recall answers with what it has. Every failure of the model leaves the fast search's answer."""
import asyncio
import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from engram_client.contract import DeepTrace, PlannedSearch, RecallRequest
from engram_client.contract.recall import DeepStop
from engram_client.errors import EngramError
from shared.errors import LlmInvalid, LlmUnavailable
from shared.llm import fell_back, prompts
from shared.llm.schemas import Reflection, SearchPlan, SubQuery
from shared.retrieval.recall import (
    Retrieval,
    Searched,
    boosts_for,
    candidates_for,
    entry_filter_of,
    for_time,
    rerank_depth,
    scope_of,
    search,
)
from shared.runtime import metrics
from shared.store import HybridSearch, ScoredEntry, Vectors

log = logging.getLogger("engram.retrieval")

FUSION_K = 10            # rank damping when the searches' lists are fused (1 / (FUSION_K + rank))
MIN_CALL_S = 0.2         # a model call with less time than this left is not started
MEMORY_CHARS = 400       # of each memory shown to the model when it reflects
REFLECT_MEMORIES = 10


@dataclass
class _State:
    lists: list[list[ScoredEntry]]
    searches: list[PlannedSearch]
    asked: set[str]


async def _run(retrieval: Retrieval, tenant: str, request: RecallRequest, subs: list[SubQuery], round_no: int,
               state: _State) -> None:
    """Run sub-queries as one batch: one embedding call, one store call. A failure keeps what was found."""
    try:
        await _batch(retrieval, tenant, request, subs, round_no, state)
    except EngramError as exc:
        log.warning("a deep recall's searches of round %d failed (%s); it answers with what it has", round_no, exc)


async def _batch(retrieval: Retrieval, tenant: str, request: RecallRequest, subs: list[SubQuery], round_no: int,
                 state: _State) -> None:
    fresh = [s for s in subs if s.query.casefold() not in state.asked]
    if not fresh:
        return
    state.asked.update(s.query.casefold() for s in fresh)
    dense = await retrieval.embedder.queries([s.query for s in fresh])
    sparse = [retrieval.sparse.query(" ".join([s.query, *s.keywords])) for s in fresh]
    flt, _ = entry_filter_of(request)
    limit = candidates_for(request)
    settings = retrieval.settings
    batch = [HybridSearch(vectors=Vectors(dense=d, sparse=v), limit=limit, entry_filter=flt,
                          prefetch_limit=max(settings.prefetch_limit, limit), rrf_k=settings.rrf_k,
                          boosts=boosts_for(s.persons, [(s.since, s.until)] if s.since or s.until else [],
                                            settings), candidates=limit)
             for s, d, v in zip(fresh, dense, sparse, strict=True)]
    results = await retrieval.store.hybrid_batch(scope_of(tenant, request), batch)
    for sub, hits in zip(fresh, results, strict=True):
        state.lists.append(hits)
        state.searches.append(PlannedSearch(round=round_no, query=sub.query, keywords=sub.keywords,
                                            persons=sub.persons, since=sub.since, until=sub.until, why=sub.why,
                                            hits=len(hits)))


def fuse(lists: list[list[ScoredEntry]], k: int) -> list[ScoredEntry]:
    """Reciprocal-rank fusion of the searches' lists (the caller orders the result for the time asked about)."""
    scores: dict[str, float] = {}
    best: dict[str, ScoredEntry] = {}
    for hits in lists:
        for rank, hit in enumerate(hits, start=1):
            scores[hit.entry.id] = scores.get(hit.entry.id, 0.0) + 1.0 / (FUSION_K + rank)
            best.setdefault(hit.entry.id, hit)
    ordered = sorted(best.values(), key=lambda h: (-scores[h.entry.id], h.entry.id))
    return [h.model_copy(update={"score": scores[h.entry.id]}) for h in ordered[:k]]


async def deep_search(retrieval: Retrieval, tenant: str, request: RecallRequest, now: datetime | None = None
                      ) -> tuple[Searched, DeepTrace]:
    """The fast search of the query fused with the searches the model plans and asks for, within the deadline."""
    started = time.perf_counter()
    deadline = started + retrieval.settings.deep_deadline_s
    now = now or datetime.now(UTC)
    fast_request = request.model_copy(update={"mode": "fast"})
    llm = retrieval.llm
    if llm is None:
        return await search(retrieval, tenant, fast_request, now), DeepTrace(rounds=0, stopped="no_model")
    if retrieval.deep_slots.locked():  # deep recalls may hold only part of the workers: fast ones keep the rest
        return await search(retrieval, tenant, fast_request, now), DeepTrace(rounds=0, stopped="busy")
    async with retrieval.deep_slots:
        fast = asyncio.ensure_future(search(retrieval, tenant, fast_request, now))

        def left() -> float:
            return deadline - time.perf_counter()

        stopped: DeepStop = "max_rounds"
        state = _State(lists=[], searches=[], asked={request.query.casefold()})
        rounds = 0
        try:
            plan = await llm.ask(tenant, "plan", prompts.document("plan", query=request.query, now=now),
                                 SearchPlan, timeout_s=left())
        except (LlmUnavailable, LlmInvalid) as exc:
            fell_back("plan", exc)
            plan = None
            stopped = "deadline" if left() < MIN_CALL_S else "model_failed"
        except BaseException:
            fast.cancel()
            raise
        searched = await fast
        state.lists.append(searched.hits)
        if plan is not None:
            rounds = 1
            await _run(retrieval, tenant, request, list(plan.queries), 1, state)
            for round_no in range(2, retrieval.settings.deep_max_rounds + 2):
                if left() < MIN_CALL_S:
                    stopped = "deadline"
                    break
                found = fuse(state.lists, REFLECT_MEMORIES)
                document = prompts.document(
                    "reflect", query=request.query, now=now, round=round_no,
                    searched=[request.query, *(s.query for s in state.searches)],
                    memories=[{"id": h.entry.id, "text": h.entry.text[:MEMORY_CHARS],
                               "occurred_at": h.entry.occurred_at} for h in found])
                try:
                    reflection = await llm.ask(tenant, "reflect", document, Reflection, timeout_s=left())
                except (LlmUnavailable, LlmInvalid) as exc:
                    fell_back("reflect", exc)
                    stopped = "deadline" if left() < MIN_CALL_S else "model_failed"
                    break
                if reflection.sufficient or not reflection.missing:
                    stopped = "sufficient"
                    break
                rounds = round_no
                await _run(retrieval, tenant, request, list(reflection.missing), round_no, state)
    if stopped == "deadline":
        metrics.deep_deadline_total.inc()
    metrics.deep_rounds.observe(rounds)
    relevance = fuse(state.lists, candidates_for(request))
    fused, ordering = await asyncio.to_thread(  # off the event loop, as recall.py says why
        for_time, relevance, searched.plan, retrieval.settings, rerank_depth(request),
        retrieval.sparse, engine_fused=False)  # fused here, by FUSION_K
    total = (time.perf_counter() - started) * 1e3
    timings = searched.timings
    model_ms = total - timings.embed - timings.search
    timings = timings.model_copy(update={"plan": max(model_ms, 0.0), "total": total})
    return replace(searched, hits=fused, relevance=relevance, ordering=ordering, timings=timings), \
        DeepTrace(rounds=rounds, searches=state.searches, stopped=stopped)
