"""The recall path as a plain function: embed, scope, hybrid search, boosts, diversity, render."""
import asyncio
import logging
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise

from engram_client.contract import DEFAULT_K, MAX_K, EntryKind, RecallRequest, Timings
from shared.embedding import WARM_UP_TIMEOUT_S, Bm25Encoder, Embedder
from shared.evidence.restated import Reader
from shared.llm import LlmClient
from shared.retrieval import hops
from shared.retrieval.currency import Currency, Restating, reorders, rerank
from shared.retrieval.mmr import mmr
from shared.retrieval.plan import QueryPlan, plan
from shared.retrieval.usage import UsageRecorder
from shared.settings import Settings
from shared.store import (
    Boost,
    Condition,
    EntryFilter,
    MemoryEntry,
    Read,
    Scope,
    ScoredEntry,
    Store,
    VectorRead,
    Vectors,
)
from shared.tracing import spans

log = logging.getLogger("engram.retrieval")
DEEP_SLOTS = 8  # deep recalls one retriever runs at once unless told (the rest are answered as fast ones)


@dataclass(frozen=True)
class Retrieval:
    """What recall needs: the store, both encoders and the tuning settings.

    Args:
        max_reply_bytes: the most a reply may take on the wire (the broker's max_payload); None is unlimited.
        deep_slots: deep recalls running at once; one arriving when all are taken is answered as a fast one, so
            deep recalls waiting on the model never hold every worker fast recalls need.
    """

    store: Store
    embedder: Embedder
    sparse: Bm25Encoder
    settings: Settings
    max_reply_bytes: int | None = None
    usage: UsageRecorder | None = None
    llm: LlmClient | None = None  # deep recall's planner; None answers deep recalls as fast ones
    deep_slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(DEEP_SLOTS))


def scope_of(tenant: str, request: RecallRequest) -> Scope:
    """Whose entries a request may see: its tenant, narrowed to its user and conversation when it names them."""
    return Scope(tenant_id=tenant, user_id=request.user_id, conversation_id=request.conversation_id)


# Every kind is searched and ranked by score; derived claims (facts, profiles) yield to newer evidence (currency.py).
SEARCHED_KINDS: list[EntryKind] = ["episodic", "fact", "profile"]
FILTERED_KINDS: list[EntryKind] = ["episodic", "fact"]  # under hard filters: a profile may not satisfy them


def _merged_visible(request: RecallRequest) -> bool:
    # A duplicate merged into an entry of another conversation would vanish from a recall scoped to its own
    # conversation (the keeper is out of scope): such a recall sees merged-away entries.
    return request.include_superseded or request.conversation_id is not None


def entry_filter_of(request: RecallRequest) -> tuple[EntryFilter, list[str]]:
    """The request's filter (kinds searched, active only unless asked, its hard filters) and, in words, what applies."""
    f = request.filters
    applied: list[str] = [] if request.include_superseded else ["active only (not superseded, not merged)"]
    if f is None:  # every kind; a profile (a summary of many times and topics) never under hard filters
        return EntryFilter(kinds=SEARCHED_KINDS, include_superseded=request.include_superseded,
                           include_merged=_merged_visible(request)), applied
    if f.persons:
        applied.append(f"persons any of {f.persons}")
    if f.topics:
        applied.append(f"topic any of {f.topics}")
    if f.location:
        applied.append(f"location = {f.location}")
    if f.since or f.until:
        applied.append(f"occurred_at in [{f.since.isoformat() if f.since else '…'}, "
                       f"{f.until.isoformat() if f.until else '…'}]")
    return EntryFilter(persons=f.persons, topics=f.topics, location=f.location, since=f.since, until=f.until,
                       kinds=FILTERED_KINDS, include_superseded=request.include_superseded,
                       include_merged=_merged_visible(request)), applied


def boosts_for(names: list[str], spans: list[tuple[datetime | None, datetime | None]],
               settings: Settings) -> list[Boost]:
    """What the engine should raise: hits naming one of `names`, hits within one of the time `spans` (either end
    may be open)."""
    out = []
    if names and settings.person_boost:
        out.append(Boost(weight=settings.person_boost, any_of=[Condition(key="persons", op="any", value=names)]))
    if spans and settings.time_boost:
        out.append(Boost(weight=settings.time_boost, any_of=[
            Condition(key="occurred_at", op="range", gte=start, lt=end) for start, end in spans]))
    return out


def _boost_reasons(hits: list[ScoredEntry], query_plan: QueryPlan, settings: Settings) -> dict[str, list[str]]:
    """Why each hit was raised (the same tests as `_boosts`, read off the hits the engine returned)."""
    names = set(query_plan.names)
    reasons: dict[str, list[str]] = {}
    for hit in hits:
        why = []
        named = [p for p in hit.entry.persons if p in names]
        if named and settings.person_boost:
            why.append(f"person named in query: {', '.join(named)} (+{settings.person_boost:g})")
        times = [t.phrase for t in query_plan.times if t.start <= hit.entry.occurred_at < t.end]
        if times and settings.time_boost:
            why.append(f"occurred within {', '.join(times)} (+{settings.time_boost:g})")
        reasons[hit.entry.id] = why
    return reasons


@dataclass(frozen=True)
class Smoothed:
    """The hits best first after `_smooth`, what each episode gained (`lifts`, by entry id) and why (`reasons`)."""

    hits: list[ScoredEntry]
    lifts: dict[str, float]
    reasons: dict[str, list[str]]


def _next_to(earlier: MemoryEntry, later: MemoryEntry) -> bool:
    """Whether `later` begins within hops.NEIGHBOUR of `earlier`'s last turn (or before it)."""
    return later.began_at - earlier.ended_at <= hops.NEIGHBOUR


def _smooth(hits: list[ScoredEntry], matched: Mapping[str, float], weight: float,
            answers: Collection[str] = ()) -> Smoothed:
    """Give each episode a share (`weight`) of the best first-pass score (`matched`, by entry id) of the episodes
    just before and after it among the hits of its conversation, when they are its neighbours: the later begins
    within hops.NEIGHBOUR of the earlier's last turn (the windows next to it, not another session's).

    Only a window the query's own search found gives: an answer the follow brought, or a window the second hop's
    words found, matched nothing of the question, and would give the hit that brought it a share of itself. An
    answer the follow brought or raised (`answers`) gains nothing from the windows beside it: it has its asking
    neighbour's share already.
    Derived claims neither give nor gain: a fact sits beside the window it came from. A turn's meaning often sits in
    the window next to it ("tomorrow" here, "the grand opening" there), and the rest of what a question asks about
    is often told in the windows beside the one it names (docs/recall.md, "The windows beside a match").
    """
    if not weight or len(hits) < 2:
        return Smoothed(hits, {}, {})
    chats: dict[str, list[ScoredEntry]] = {}
    for hit in hits:
        if hit.entry.kind == "episodic":
            chats.setdefault(hit.entry.conversation_id, []).append(hit)
    lifts: dict[str, float] = {}
    reasons: dict[str, list[str]] = {}
    for chat in chats.values():
        chat.sort(key=lambda h: (h.entry.began_at, h.entry.source_turn_ids))
        beside = [_next_to(a.entry, b.entry) for a, b in pairwise(chat)]  # beside[i]: chat[i] and chat[i + 1]
        for i, hit in enumerate(chat):
            if hit.entry.id in answers:
                continue
            near = [chat[j] for j, ok in ((i - 1, i > 0 and beside[i - 1]), (i + 1, i < len(beside) and beside[i]))
                    if ok and chat[j].entry.id in matched]
            if near:
                giver = max(near, key=lambda h: matched[h.entry.id])
                lifts[hit.entry.id] = weight * matched[giver.entry.id]
                reasons[hit.entry.id] = [f"the window next to it matched: {giver.entry.id} "
                                         f"(+{lifts[hit.entry.id]:.3f})"]
    out = [hit.model_copy(update={"score": hit.score + lifts[hit.entry.id]}) if hit.entry.id in lifts else hit
           for hit in hits]
    out.sort(key=lambda h: h.score, reverse=True)
    return Smoothed(out, lifts, reasons)


def for_time(hits: list[ScoredEntry], query_plan: QueryPlan, settings: Settings, k: int, sparse: Bm25Encoder,
             engine_fused: bool = True, lifts: Mapping[str, float] | None = None
             ) -> tuple[list[ScoredEntry], dict[str, list[str]]]:
    """The hits ordered for the time the query asks about (currency.py), last, so that nothing after it undoes
    what `explain` says, and why each one moved (`engine_fused`: the scores are the store's fusion of the hits'
    ranks; `sparse`: BM25's analysis, which judges restatements; `lifts`: what the windows beside a match added to
    each score, which the band does not count)."""
    currency = Currency(band=settings.recency_band, weight=settings.recency_weight,
                        tense_weight=settings.recency_tense_weight, rrf_k=settings.rrf_k)
    reader = Reader(sparse)
    restating = Restating(reader, reader.subject(query_plan.topic, query_plan.figure))
    return rerank(hits, query_plan.reading, currency, k, query_plan.figure, engine_fused, restating, lifts)


@dataclass(frozen=True)
class Searched:
    """Ranked hits for a request (before rendering), with why each one was raised (`boosts`) or moved for the
    time the question asks about (`ordering`), the filters that applied, and where the time went."""

    hits: list[ScoredEntry]
    boosts: dict[str, list[str]]
    ordering: dict[str, list[str]]
    applied: list[str]
    timings: Timings
    plan: QueryPlan
    candidates: int = 0
    hops: dict[str, list[str]] = field(default_factory=dict)  # second-hop entries: the links that brought each
    relevance: list[ScoredEntry] | None = None  # the hits in relevance's order, before time ordered them (None: hits)


BUDGET_TOKENS_PER_CANDIDATE = 40  # a recall by budget alone searches one candidate per this many tokens of budget


def rerank_depth(request: RecallRequest) -> int:
    """How many of the first hits time may reorder (currency.py): k, or for a recall by budget alone the default k;
    past them it packs in relevance order (reordering all its candidates for time cost LoCoMo dev all-evidence
    recall 0.896 -> 0.784 at 4,000 tokens)."""
    return min(request.limit, DEFAULT_K) if request.k is None else request.limit


def candidates_for(request: RecallRequest) -> int:
    """How many hits a recall ranks before it cuts: twice its k (room for boosts, currency and diversity to change
    the order), or for a budget alone one per BUDGET_TOKENS_PER_CANDIDATE tokens; 20 at least, 2 x MAX_K at most."""
    if request.k is None and request.token_budget is not None:
        wanted = request.token_budget // BUDGET_TOKENS_PER_CANDIDATE
    else:
        wanted = request.limit * 2
    return min(max(wanted, 20), 2 * MAX_K)


async def search(retrieval: Retrieval, tenant: str, request: RecallRequest, now: datetime | None = None) -> Searched:
    """Ranked hits for a request (before rendering), with their reasons, the applied filters and timings."""
    settings = retrieval.settings
    started = time.perf_counter()
    # The model runs on its own thread; planning and the BM25 query (both short) run here meanwhile.
    embed_span = spans.start("engram.recall embed")
    try:
        embedding = asyncio.ensure_future(retrieval.embedder.queries([request.query]))
        try:
            with spans.span("engram.recall plan"):
                query_plan = plan(request.query, now or datetime.now(UTC), settings.bm25_language)
                sparse = retrieval.sparse.query(query_plan.topic)
        except BaseException:
            embedding.cancel()
            raise
        planned = time.perf_counter()
        dense = await embedding
    finally:
        spans.end(embed_span)
    embedded = time.perf_counter()
    entry_filter, applied = entry_filter_of(request)
    use_mmr = settings.mmr_lambda is not None
    limit = request.limit
    depth = rerank_depth(request)
    candidates = candidates_for(request)
    # Each search's ranks (two more requests in the same engine call) when currency will count them again by kind.
    ranks = request.explain or reorders(query_plan.reading, depth)
    # Boosts reorder the candidates in the engine; currency, diversity and smoothing look at all of them here.
    scope = scope_of(tenant, request)
    with spans.span("engram.recall search", attributes={"engram.candidates": candidates}):
        hits = await retrieval.store.hybrid_query(
            scope, Vectors(dense=dense[0], sparse=sparse),
            limit=candidates, entry_filter=entry_filter,
            prefetch_limit=max(settings.prefetch_limit, candidates), rrf_k=settings.rrf_k,
            boosts=boosts_for(query_plan.names, [(t.start, t.end) for t in query_plan.times], settings),
            candidates=candidates, explain=ranks, with_vectors=use_mmr)
    # The second hop's search and the follow's reads, in one engine call: both start from the first pass.
    first = hits
    matched = {h.entry.id: h.score for h in first}  # the first pass's hits and scores
    found = hops.links(first, query_plan, settings.second_hop_seeds) if settings.second_hop_seeds and first else None
    asked = hops.asking(first, settings.follow_questions) if settings.follow_questions else []
    reads: list[Read] = []
    hopping = found is not None and bool(found.words)  # the first read is the second hop's search
    if found is not None and hopping:
        widened = retrieval.sparse.query(" ".join([query_plan.topic, *found.words]))
        reads.append(VectorRead(scope=scope, vectors=Vectors(dense=dense[0], sparse=widened), using="sparse",
                                limit=candidates, entry_filter=entry_filter))
    reads += hops.answer_reads(scope, entry_filter, asked)
    second: list[ScoredEntry] | None = None
    answered: list[tuple[ScoredEntry, MemoryEntry]] = []
    if reads:
        with spans.span("engram.recall second hop", attributes={"engram.reads": len(reads)}):
            read = await retrieval.store.reads(reads)
        second = read[0] if hopping else None
        answered = hops.answers(asked, read[1 if hopping else 0:])
    hopped: dict[str, list[str]] = {}
    if second is not None and found is not None:
        hits, hopped = hops.fuse(hits, second, found, settings.second_hop_weight, settings.second_hop_boost,
                                 settings.rrf_k)
    raised: dict[str, list[str]] = {}  # first-pass hits a link raised, and why
    hits, followed = hops.raise_answers(hits, answered, settings.follow_weight)
    for entry_id, why in followed.items():
        (raised if entry_id in matched else hopped).setdefault(entry_id, []).extend(why)
    searched = time.perf_counter()
    with spans.span("engram.recall rerank"):  # smoothing, diversity, currency (the order for the asked time)
        reasons = _boost_reasons(hits, query_plan, settings)
        for entry_id, why in raised.items():
            reasons[entry_id].extend(why)
        smoothed = _smooth(hits, matched, settings.neighbor_weight, followed.keys())
        hits = smoothed.hits
        for entry_id, why in smoothed.reasons.items():
            reasons.setdefault(entry_id, []).extend(why)
        if use_mmr and settings.mmr_lambda is not None:
            hits = mmr(hits, limit, settings.mmr_lambda)
        # Off the event loop: judging currency reads the entries' text (a figure asked for), which other tenants'
        # requests and the process's health checks must not wait behind.
        relevance = hits[:limit]
        hits, ordering = await asyncio.to_thread(for_time, hits, query_plan, settings, depth, retrieval.sparse,
                                                 lifts=smoothed.lifts)
        hits = hits[:limit]
    done = time.perf_counter()
    timings = Timings(embed=(embedded - planned) * 1e3, search=(searched - embedded) * 1e3,
                      plan=((planned - started) + (done - searched)) * 1e3, total=(done - started) * 1e3)
    return Searched(hits, reasons, ordering, applied, timings, query_plan, candidates, hopped, relevance)


async def warm_up(retrieval: Retrieval) -> None:
    """Load what the first recall would otherwise wait for: language model, date parser, BM25, tokenizer, embedder."""
    from shared.text import tokens

    query = "What did Ana do last week in Lisbon?"
    await asyncio.to_thread(plan, query, datetime.now(UTC), retrieval.settings.bm25_language)
    await asyncio.to_thread(retrieval.sparse.query, query)
    await asyncio.to_thread(tokens.count, query, retrieval.settings.tokenizer)
    try:
        await asyncio.wait_for(retrieval.embedder.queries([query]), WARM_UP_TIMEOUT_S)
    except Exception as exc:  # an endpoint that is down must not keep the service from starting
        log.warning("embedder warm-up failed (%s); recalls will say so until it answers", exc)
