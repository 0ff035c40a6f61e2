"""Evidence recall per question, aggregated per category and overall, with the context each answer cost."""
import statistics
from collections.abc import Iterable

from pydantic import BaseModel, Field

from shared.evaluation import locomo


class CategoryScore(BaseModel):
    """Scores of one category (or all) at one k."""

    questions: int = 0
    all_at_k: float = 0.0
    any_at_k: float = 0.0
    frac_at_k: float = 0.0


class Row(BaseModel):
    """One question's outcome at one k."""

    category: int
    all_hit: bool
    any_hit: bool
    fraction: float
    tokens: int


class SystemScore(BaseModel):
    """One system (engram or a baseline) on one conversation at one k."""

    system: str
    conversation: str
    k: int
    overall: CategoryScore
    categories: dict[int, CategoryScore] = Field(default_factory=dict)
    mean_context_tokens: float = 0.0
    context_ratio: float = 0.0  # mean context tokens / tokens of the whole conversation


def row(question: locomo.Question, sources: Iterable[Iterable[str]], tokens: int) -> Row:
    """Score one answer: the source turn ids of its top-k items and the tokens of its context."""
    all_hit, any_hit, fraction = locomo.score(question.evidence, list(sources))
    return Row(category=question.category, all_hit=all_hit, any_hit=any_hit, fraction=fraction, tokens=tokens)


def _aggregate(rows: list[Row]) -> CategoryScore:
    if not rows:
        return CategoryScore()
    return CategoryScore(questions=len(rows), all_at_k=statistics.fmean(r.all_hit for r in rows),
                         any_at_k=statistics.fmean(r.any_hit for r in rows),
                         frac_at_k=statistics.fmean(r.fraction for r in rows))


def summarise(system: str, conversation: str, k: int, rows: list[Row], conversation_tokens: int) -> SystemScore:
    """Per-category and overall scores of one system at one k."""
    by_category: dict[int, list[Row]] = {}
    for r in rows:
        by_category.setdefault(r.category, []).append(r)
    tokens = statistics.fmean(r.tokens for r in rows) if rows else 0.0
    return SystemScore(system=system, conversation=conversation, k=k, overall=_aggregate(rows),
                       categories={c: _aggregate(rs) for c, rs in sorted(by_category.items())},
                       mean_context_tokens=tokens, context_ratio=tokens / conversation_tokens if conversation_tokens
                       else 0.0)
