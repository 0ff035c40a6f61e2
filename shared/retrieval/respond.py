"""A recall answered: the fast or deep search, the working memory (summarised when long) and a rendered context
that fits both the token budget and the broker's reply size."""
import asyncio
import time
from dataclasses import dataclass, replace
from datetime import datetime

from engram_client.contract import Explanation, PlannedTime, RecallPlan, RecallRequest, RecallResponse, Turn
from shared.retrieval import render as rendering
from shared.retrieval.currency import DERIVED
from shared.retrieval.deep import deep_search
from shared.retrieval.excerpt import excerpts
from shared.retrieval.fit import fit_recall
from shared.retrieval.pack import Packed, pack
from shared.retrieval.plan import QueryPlan
from shared.retrieval.recall import Retrieval, Searched, search
from shared.retrieval.views import recalled_entry
from shared.store import ScoredEntry
from shared.text import tokens
from shared.tracing import spans


def _matched_terms(text: str, terms: list[str]) -> list[str]:
    lowered = text.lower()
    return [t for t in terms if t in lowered]


@dataclass(frozen=True)
class Chosen:
    """The hits a reply holds, in rank order; how they were packed (with a budget) and their ids in the order they
    were picked (`picking_order`); the ids of those cut to the turns the question is about (excerpt.py)."""

    hits: list[ScoredEntry]
    packed: Packed | None = None
    excerpts: frozenset[str] = frozenset()
    picked: list[str] | None = None


def picking_order(hits: list[ScoredEntry], relevance: list[ScoredEntry] | None) -> list[ScoredEntry]:
    """The order a budget is filled in: the hit time put first (currency.py), then the others in relevance's order,
    except that a derived claim (a fact, a profile) comes only after every hit time put above it, so a claim never
    fits where the newer evidence against it did not. Time orders what relevance picked, as with k: packing in
    time's order let newer chatter about the same thing, raised above the evidence, fill a small budget and leave
    the evidence out (LoCoMo dev all-evidence recall at 500 tokens 0.606 -> 0.697, in process)."""
    if not hits or relevance is None:
        return hits
    place = {h.entry.id: i for i, h in enumerate(hits)}
    wanted = [hits[0], *(h for h in relevance if h.entry.id in place and h.entry.id != hits[0].entry.id)]
    named = {h.entry.id for h in wanted}
    wanted += [h for h in hits if h.entry.id not in named]  # any hit relevance did not list, in rank order
    out: list[ScoredEntry] = []
    waiting: list[ScoredEntry] = []  # claims some hit time put above them has not preceded yet
    done: set[str] = set()
    above = 0  # hits[:above], time's first, have all been put out
    for hit in wanted:
        if hit.entry.kind in DERIVED and place[hit.entry.id] > above:
            waiting.append(hit)
            continue
        out.append(hit)
        done.add(hit.entry.id)
        while True:  # each hit put out may free the claims below it, and each claim the ones below that
            while above < len(hits) and hits[above].entry.id in done:
                above += 1
            ready = sorted((w for w in waiting if place[w.entry.id] <= above), key=lambda w: place[w.entry.id])
            if not ready:
                break
            out.extend(ready)
            done.update(w.entry.id for w in ready)
            waiting = [w for w in waiting if w.entry.id not in done]
    return out + sorted(waiting, key=lambda w: place[w.entry.id])


def chosen(searched: Searched, request: RecallRequest, encoding: str, reserve: int = 0,
           whole_share: float | None = None) -> Chosen:
    """The first `limit` ranked hits, packed into the token budget less `reserve` (what the recent turns and their
    summary will take) when there is a budget (pack.py), in `picking_order` and given in rank order; with
    `whole_share`, the first hits picked stay whole while they take at most that share of it, and the episodes
    after them are cut to the turns the question is about."""
    ranked = searched.hits[:request.limit]
    if request.token_budget is None:
        return Chosen(ranked)
    hits = picking_order(ranked, searched.relevance)
    timeline = searched.plan.sequence is not None
    separator = tokens.count("\n\n", encoding)
    header = rendering.TIMELINE_HEADER if timeline else rendering.MEMORIES_HEADER

    def cost(hit: ScoredEntry) -> int:
        return tokens.count(rendering.block(hit, timeline), encoding) + separator

    room = request.token_budget - tokens.count(header, encoding) - reserve
    cut: frozenset[str] = frozenset()
    if whole_share is not None:
        hits, cut = excerpts(hits, searched.plan, cost, int(room * whole_share))
    packed = pack(hits, cost, room)
    picked = [h.entry.id for h in packed.hits]  # pack keeps the order it was given
    rank = {h.entry.id: i for i, h in enumerate(ranked)}
    packed = replace(packed, hits=sorted(packed.hits, key=lambda h: rank[h.entry.id]))
    return Chosen(packed.hits, packed, cut, picked)


def reserved(recent: list[Turn], summary: str | None, budget: int | None, encoding: str) -> int:
    """The tokens the recent turns and their summary take in the context, up to half the budget: entries packed by
    budget leave them this room (the entries come first in the context, and would otherwise take it all)."""
    if budget is None or not (recent or summary):
        return 0
    _, used, _ = rendering.render([], recent, budget // 2, encoding, summary)
    return used


def in_order(hits: list[ScoredEntry], timeline: bool) -> list[ScoredEntry]:
    """The hits as the reply gives them: in rank order, or oldest first (by their first turn) on a timeline."""
    return sorted(hits, key=lambda h: h.entry.began_at) if timeline else hits


def plan_view(query_plan: QueryPlan, request: RecallRequest, searched: Searched) -> RecallPlan:
    """The plan as `explain` shows it."""
    return RecallPlan(
        language=query_plan.lang, terms=query_plan.terms, names=query_plan.names,
        times=[PlannedTime(phrase=t.phrase, start=t.start, end=t.end) for t in query_plan.times],
        orientation=query_plan.reading.orientation, orientation_cue=query_plan.reading.cue,
        figure=query_plan.figure.cue if query_plan.figure else None, sequence=query_plan.sequence,
        roles=sorted(query_plan.roles),
        limit=request.limit, token_budget=request.token_budget, candidates=searched.candidates,
        second_hop=len(searched.hops))


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
    boosts, applied, timings, query_plan = searched.boosts, searched.applied, searched.timings, searched.plan
    recent = list(working_memory or []) if request.include_working_memory else []
    summary = summary if request.include_working_memory else None
    encoding = retrieval.settings.tokenizer
    # Counting tokens and packing are CPU work: off the event loop, as recall.py says why.
    settings = retrieval.settings
    picked = await asyncio.to_thread(chosen, searched, request, encoding,
                                     reserved(recent, summary, request.token_budget, encoding),
                                     settings.excerpt_whole_share if settings.excerpts else None)
    hits, packed = picked.hits, picked.packed
    timeline = query_plan.sequence is not None
    in_time = [f"oldest first: the question asks for the order of events ({query_plan.sequence})"] if timeline else []
    shown_plan = plan_view(query_plan, request, searched) if request.explain else None

    def build(candidates: list[ScoredEntry], recent: list[Turn]) -> RecallResponse:
        # `fit_recall` cuts the candidates picked last (rank order without a budget); the timeline orders the rest.
        context, context_tokens, kept = rendering.render(in_order(candidates, timeline), recent, request.token_budget,
                                                         encoding, summary, timeline)
        entries = [recalled_entry(h, Explanation(
            dense_rank=h.dense_rank, dense_score=h.dense_score, sparse_rank=h.sparse_rank,
            sparse_score=h.sparse_score, fused_score=h.score,
            matched_terms=_matched_terms(h.entry.text, query_plan.terms),
            filters=[f"tenant = {tenant}", *applied], boosts=boosts.get(h.entry.id, []),
            ordering=[*searched.ordering.get(h.entry.id, []), *in_time],
            hop=2 if h.entry.id in searched.hops else 1, via=searched.hops.get(h.entry.id, []),
        ) if request.explain else None, excerpt=h.entry.id in picked.excerpts) for h in kept]
        return RecallResponse(entries=entries, working_memory=recent, working_memory_summary=summary,
                              context=context, context_tokens=context_tokens, timings_ms=timings,
                              deep=trace if request.explain else None, plan=shown_plan,
                              left_out=packed.left_out if packed else 0,
                              left_out_tokens=packed.left_out_tokens if packed else 0)

    with spans.span("engram.recall render"):
        reply = fit_recall(build, hits, recent, retrieval.max_reply_bytes, picked.picked)
    if retrieval.usage is not None:
        retrieval.usage.record(tenant, [e.id for e in reply.entries])
    total = (time.perf_counter() - started) * 1e3
    return reply.model_copy(update={"timings_ms": timings.model_copy(update={"total": total})})
