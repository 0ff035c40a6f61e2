"""The simple designs a user would otherwise build, scored on the same data with the same embedder and store.

(a) dense top-k over single turns, (b) BM25 top-k over single turns, (c) turn pairs, dense,
(d) hybrid RRF over single turns, (e) non-overlapping 6-turn session windows prefixed with the session date,
hybrid RRF; and for the curve of recall against tokens, (f) the same windows with BM25 alone. Hybrid baselines fuse
in the store exactly as engram does (same RRF constant).
"""
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from engram_client.contract import Turn
from shared.compress import IMAGE_CAPTION_KEY
from shared.embedding import Bm25Encoder, Embedder
from shared.evaluation import locomo
from shared.evaluation.scoring import Row, row
from shared.retrieval.render import render
from shared.store import MemoryEntry, Scope, ScoredEntry, Store, StoredEntry, Vectors, entry_id

Search = Literal["dense", "sparse", "hybrid"]


@dataclass(frozen=True)
class Unit:
    """One retrievable item of a baseline: its text and the turns it stands for."""

    text: str
    sources: list[str]
    occurred_at: datetime
    conversation_id: str = ""  # its own conversation, when the units of one index come from several


def _line(turn: Turn) -> str:
    caption = turn.metadata.get(IMAGE_CAPTION_KEY)
    return f"{turn.speaker}: {turn.text}" + (f" [shares a photo: {caption}]" if caption else "")


def single_turns(conversation: locomo.Conversation) -> list[Unit]:
    """Each turn alone."""
    return [Unit(_line(t), [t.turn_id], t.ts) for t in conversation.turns]


def turn_pairs(conversation: locomo.Conversation) -> list[Unit]:
    """Consecutive pairs of turns within a session (a common user/assistant archive)."""
    return [Unit("\n".join(_line(t) for t in session[i:i + 2]), [t.turn_id for t in session[i:i + 2]], session[i].ts)
            for session in conversation.sessions for i in range(0, len(session), 2)]


def session_windows(conversation: locomo.Conversation, size: int = 6) -> list[Unit]:
    """Non-overlapping windows of `size` turns per session, prefixed with the session date."""
    return windows(conversation.sessions, size)


def windows(sessions: Sequence[Sequence[Turn]], size: int = 6) -> list[Unit]:
    """Non-overlapping windows of `size` turns per session, prefixed with the session date, each of its
    session's conversation."""
    units = []
    for session in (s for s in sessions if s):
        day = session[0].ts.strftime("%d %B %Y").lstrip("0")
        for i in range(0, len(session), size):
            window = session[i:i + size]
            units.append(Unit(f"[{day}] " + "\n".join(_line(t) for t in window), [t.turn_id for t in window],
                              window[0].ts, window[0].conversation_id))
    return units


@dataclass(frozen=True)
class Baseline:
    """A named baseline: how it cuts the conversation and how it searches."""

    name: str
    short: str
    label: str
    units: Callable[[locomo.Conversation], list[Unit]]
    search: Search


BASELINES = [
    Baseline("dense-turns", "(a) dense turns", "(a) dense, single turns", single_turns, "dense"),
    Baseline("bm25-turns", "(b) bm25 turns", "(b) BM25, single turns", single_turns, "sparse"),
    Baseline("dense-pairs", "(c) dense pairs", "(c) dense, turn pairs", turn_pairs, "dense"),
    Baseline("hybrid-turns", "(d) hybrid turns", "(d) hybrid RRF, single turns", single_turns, "hybrid"),
    Baseline("hybrid-windows6", "(e) hybrid win6", "(e) hybrid RRF, 6-turn session windows + date",
             session_windows, "hybrid"),
]
# Not in the k tables above (they stay as they were): the curve's pair of windowed baselines, one search apart.
BM25_WINDOWS = Baseline("bm25-windows6", "(f) bm25 win6", "(f) BM25, 6-turn session windows + date", session_windows,
                        "sparse")
CURVE_BASELINES = [BM25_WINDOWS, next(b for b in BASELINES if b.name == "hybrid-windows6")]
TOP = 100  # hits a baseline ranks before packing them into a budget: the budget, not the count, is the limit


async def index(store: Store, embedder: Embedder, bm25: Bm25Encoder, tenant: str, units: list[Unit],
                conversation_id: str, user_id: str | None = None) -> None:
    """Store a baseline's units (one batch of embeddings) under its own tenant (and user, when given); a unit
    without a conversation of its own is stored under `conversation_id`."""
    now = datetime.now(UTC)
    texts = [u.text for u in units]
    dense = await embedder.passages(texts)
    items = [StoredEntry(entry=MemoryEntry(
        id=entry_id(tenant, u.conversation_id or conversation_id, u.sources), tenant_id=tenant, user_id=user_id,
        conversation_id=u.conversation_id or conversation_id, text=u.text, occurred_at=u.occurred_at,
        created_at=now, updated_at=now, source_turn_ids=u.sources),
        vectors=Vectors(dense=d, sparse=bm25.document(u.text))) for u, d in zip(units, dense, strict=True)]
    await store.upsert(items)


async def ranked(store: Store, bm25: Bm25Encoder, scope: Scope, baseline: Baseline, question: str,
                 dense: list[float], limit: int, rrf_k: int) -> list[ScoredEntry]:
    """A baseline's best `limit` units for one question (its dense query vector already embedded)."""
    query = Vectors(dense=dense, sparse=bm25.query(question))
    if baseline.search == "hybrid":
        return await store.hybrid_query(scope, query, limit=limit, prefetch_limit=max(40, limit), rrf_k=rrf_k)
    return await store.search(scope, query, using=baseline.search, limit=limit)


def packed(hits: list[ScoredEntry], budgets: Sequence[int], encoding: str) -> dict[int, tuple[list[ScoredEntry], int]]:
    """The hits that fit each budget, rendered as engram renders its context (rank order while they fit), and the
    tokens of that context."""
    out = {}
    for budget in budgets:
        _, tokens, kept = render(hits, [], budget, encoding)
        out[budget] = (kept, tokens)
    return out


async def answer(store: Store, embedder: Embedder, bm25: Bm25Encoder, tenant: str, baseline: Baseline,
                 questions: list[locomo.Question], ks: list[int], rrf_k: int,
                 encoding: str) -> dict[int, list[Row]]:
    """Rows for every question at every k (one search at the largest k; prefixes for the smaller ones)."""
    top = max(ks)
    vectors = await embedder.queries([q.question for q in questions])
    scope = Scope(tenant_id=tenant)
    out: dict[int, list[Row]] = {k: [] for k in ks}
    for question, dense in zip(questions, vectors, strict=True):
        hits = await ranked(store, bm25, scope, baseline, question.question, dense, top, rrf_k)
        for k in ks:
            _, tokens, _ = render(hits[:k], [], None, encoding)
            out[k].append(row(question, [h.entry.source_turn_ids for h in hits[:k]], tokens))
    return out


async def answer_within(store: Store, embedder: Embedder, bm25: Bm25Encoder, tenant: str, baseline: Baseline,
                        questions: list[locomo.Question], budgets: Sequence[int], rrf_k: int,
                        encoding: str) -> dict[int, list[Row]]:
    """Rows for every question at every token budget (one search of the best TOP units; what fits each budget)."""
    vectors = await embedder.queries([q.question for q in questions])
    scope = Scope(tenant_id=tenant)
    out: dict[int, list[Row]] = {b: [] for b in budgets}
    for question, dense in zip(questions, vectors, strict=True):
        hits = await ranked(store, bm25, scope, baseline, question.question, dense, TOP, rrf_k)
        for budget, (kept, tokens) in packed(hits, budgets, encoding).items():
            out[budget].append(row(question, [h.entry.source_turn_ids for h in kept], tokens))
    return out
