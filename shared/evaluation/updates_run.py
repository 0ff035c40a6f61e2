"""`engram eval updates`: publish every story of a half through NATS, consolidate, ask its questions, and score."""
import uuid
from collections.abc import Awaitable, Callable, Sequence

from pydantic import BaseModel, Field

from engram_client import MemoryClient
from engram_client.contract import MAX_K, RecallRequest
from shared.evaluation.machine import describe
from shared.evaluation.stories import publish_and_wait
from shared.evaluation.updates import (
    FactCheck,
    Figures,
    Judged,
    Story,
    check_facts,
    figures,
    judge,
    profile_holds_current,
    stale_profile_lines,
)


class UpdatesReport(BaseModel):
    """Everything one run of the update stories measured."""

    machine: dict[str, object] = Field(default_factory=describe)
    split: str = ""
    k: int = 10  # entries per recall; with a token budget, as many as fit (up to MAX_K)
    token_budget: int | None = None
    mode: str = "fast"
    consolidated: bool = True
    ingest_s: float = 0.0
    overall: Figures = Field(default_factory=Figures)
    by_language: dict[str, Figures] = Field(default_factory=dict)
    by_change: dict[str, Figures] = Field(default_factory=dict)    # "<language>/<change>"
    by_category: dict[str, Figures] = Field(default_factory=dict)
    judged: list[Judged] = Field(default_factory=list)
    context_tokens: list[int] = Field(default_factory=list)  # each judged question's context, in its order
    stale: dict[str, list[str]] = Field(default_factory=dict)    # story id → profile lines stating a replaced value
    facts: list[FactCheck] = Field(default_factory=list)
    profile_current: list[str] = Field(default_factory=list)    # stories whose profile states the current value


def _group(report: "UpdatesReport", key: Callable[[Judged], str]) -> dict[str, Figures]:
    keys = sorted({key(j) for j in report.judged})
    return {name: figures([j for j in report.judged if key(j) == name], report.stale, report.k, report.facts,
                          report.profile_current)
            for name in keys}


def summarise(report: UpdatesReport) -> UpdatesReport:
    """The report with its figures computed from its judged questions."""
    return report.model_copy(update={
        "overall": figures(report.judged, report.stale, report.k, report.facts, report.profile_current),
        "by_language": _group(report, lambda j: j.language),
        "by_change": _group(report, lambda j: f"{j.language}/{j.change}"),
        "by_category": _group(report, lambda j: j.category)})


async def _profile(client: MemoryClient, user_id: str) -> str | None:
    page = await client.entries(op="list", user_id=user_id, kind="profile", limit=5)
    return page.entries[0].text if page.entries else None


async def _facts(client: MemoryClient, user_id: str) -> list[tuple[str, bool]]:
    """The user's active facts (text, marked possibly outdated)."""
    page = await client.entries(op="list", user_id=user_id, kind="fact", limit=500)
    return [(e.text, e.outdated_by is not None) for e in page.entries
            if e.superseded_by is None and e.merged_into is None]


async def run(client_for: Callable[[str], Awaitable[MemoryClient]], stories: Sequence[Story], split: str, *,
              k: int = 10, mode: str = "fast", consolidate: bool = True, token_budget: int | None = None,
              progress: Callable[[str], None] = lambda _: None) -> UpdatesReport:
    """Publish every story into one fresh tenant (a user each), consolidate, ask, and score: each question with k
    entries, or with `token_budget`, the entries that fit it (then "@k" counts what the reply holds)."""
    run_id = uuid.uuid4().hex[:8]
    tenant = f"updates-{split}-{run_id}"
    report = UpdatesReport(split=split, k=MAX_K if token_budget else k, token_budget=token_budget, mode=mode,
                           consolidated=consolidate)
    async with await client_for(tenant) as client:
        sessions = [s for story in stories for s in story.turns(run_id)]
        progress(f"publishing {sum(len(s) for s in sessions)} turns of {len(stories)} stories")
        report.ingest_s = await publish_and_wait(client, sessions)
        if consolidate:
            progress("consolidating")
            await client.consolidate()
        progress(f"asking {sum(len(s.questions) for s in stories)} questions")
        for story in stories:
            user_id = story.user_id(run_id)
            for question in story.questions:
                reply = await client.recall(RecallRequest(query=question.query, user_id=user_id, mode=mode,
                                                          k=None if token_budget else k, token_budget=token_budget))
                report.judged.append(judge(story, question, [e.text for e in reply.entries],
                                           [e.kind for e in reply.entries]))
                report.context_tokens.append(reply.context_tokens)
            report.facts.append(check_facts(story, await _facts(client, user_id)))
            profile = await _profile(client, user_id)
            stale = stale_profile_lines(story, profile)
            if stale:
                report.stale[story.id] = stale
            if profile_holds_current(story, profile):
                report.profile_current.append(story.id)
    return summarise(report)
