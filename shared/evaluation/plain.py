"""Evidence recall on LoCoMo through the plain-function path (no broker): the quality floor the tests guard."""
import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime

from engram_client.contract import RecallRequest
from shared.evaluation import locomo
from shared.ingest import windows
from shared.ingest.writer import Writer, memorize
from shared.retrieval import Retrieval, recall


@dataclass
class CategoryScore:
    """Scores of one category (or all) of one conversation."""

    questions: int = 0
    all_at_k: float = 0.0
    any_at_k: float = 0.0
    frac_at_k: float = 0.0


@dataclass
class ConversationScore:
    """Evidence recall@k of one conversation, per category and overall, with the context it cost."""

    sample_id: str
    k: int
    overall: CategoryScore
    categories: dict[int, CategoryScore] = field(default_factory=dict)
    mean_context_tokens: float = 0.0
    entries: int = 0


def _aggregate(rows: list[tuple[bool, bool, float]]) -> CategoryScore:
    return CategoryScore(questions=len(rows), all_at_k=statistics.fmean(r[0] for r in rows),
                         any_at_k=statistics.fmean(r[1] for r in rows), frac_at_k=statistics.fmean(r[2] for r in rows))


async def ingest_conversation(writer: Writer, tenant: str, conversation: locomo.Conversation,
                              window_turns: int) -> int:
    """Store every session of a conversation, window by window, as the ingestor would. Returns entry count."""
    stored = 0
    for session in conversation.sessions:
        stored += len(await memorize(writer, windows.split(tenant, session, window_turns)))
    return stored


async def evaluate(retrieval: Retrieval, tenant: str, conversation: locomo.Conversation, k: int = 10,
                   token_budget: int | None = None) -> ConversationScore:
    """Ask every scored question and score the evidence the top-k entries cover."""
    rows: dict[int, list[tuple[bool, bool, float]]] = {}
    tokens = []
    now = datetime.now(UTC)
    for question in conversation.scored():
        reply = await recall(retrieval, tenant, RecallRequest(query=question.question, user_id=conversation.user_id,
                                                              k=k, token_budget=token_budget), now=now)
        rows.setdefault(question.category, []).append(
            locomo.score(question.evidence, [e.source_turn_ids for e in reply.entries]))
        tokens.append(reply.context_tokens)
    everything = [r for rs in rows.values() for r in rs]
    return ConversationScore(sample_id=conversation.sample_id, k=k, overall=_aggregate(everything),
                             categories={c: _aggregate(rs) for c, rs in sorted(rows.items())},
                             mean_context_tokens=statistics.fmean(tokens) if tokens else 0.0)
