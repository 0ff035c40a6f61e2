"""`engram eval multihop`: publish every story of a half through NATS, ask its questions within a token budget, and
score all-evidence turn recall by question type and language, and ordering questions' chronological order."""
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from engram_client import MemoryClient
from engram_client.contract import RecalledEntry, RecallRequest
from shared.embedding import Bm25Encoder, Embedder
from shared.evaluation import baselines, curve
from shared.evaluation.latency import percentiles
from shared.evaluation.locomo_run import ENGRAM, ENGRAM_LABEL
from shared.evaluation.machine import describe
from shared.evaluation.multihop import Figures, Hit, Judged, QuestionType, Story, figures, judge
from shared.evaluation.stories import publish_and_wait
from shared.settings import Settings
from shared.store import EdgeStore, MemoryEntry, Scope, Store


class MultihopReport(BaseModel):
    """Everything one run of the multi-session stories measured."""

    machine: dict[str, object] = Field(default_factory=describe)
    split: str = ""
    k: int | None = None  # None: the budget alone decides how many entries
    token_budget: int | None = 2000
    mode: str = "fast"
    crowd: int = 1  # stories a user (multihop.crowded)
    distractors: bool = False  # each story with its distractor sessions (multihop.with_distractors)
    first_person: bool = False  # the questions asked in the user's voice (multihop.in_first_person)
    verbose: int = 0  # each assistant turn lengthened to at least this many characters (multihop.verbose)
    ingest_s: float = 0.0
    overall: Figures = Field(default_factory=Figures)
    by_type: dict[str, Figures] = Field(default_factory=dict)            # multi_hop, ordering, single_hop
    by_language_type: dict[str, Figures] = Field(default_factory=dict)   # "<language>/<type>"
    judged: list[Judged] = Field(default_factory=list)


def summarise(report: MultihopReport) -> MultihopReport:
    """The report with its figures computed from its judged questions."""
    def group(key: Callable[[Judged], str]) -> dict[str, Figures]:
        return {name: figures([j for j in report.judged if key(j) == name])
                for name in sorted({key(j) for j in report.judged})}

    return report.model_copy(update={"overall": figures(report.judged), "by_type": group(lambda j: j.type),
                                     "by_language_type": group(lambda j: f"{j.language}/{j.type}")})


async def run(client_for: Callable[[str], Awaitable[MemoryClient]], stories: Sequence[Story], split: str, *,
              k: int | None = None, token_budget: int | None = 2000, mode: str = "fast",
              progress: Callable[[str], None] = lambda _: None) -> MultihopReport:
    """Publish every story into one fresh tenant (a user each), ask every question scoped to its user, and score."""
    run_id = uuid.uuid4().hex[:8]
    prefix = f"{run_id}-"
    report = MultihopReport(split=split, k=k, token_budget=token_budget, mode=mode)
    async with await client_for(f"multihop-{split}-{run_id}") as client:
        sessions = [s for story in stories for s in story.turns(run_id)]
        progress(f"publishing {sum(len(s) for s in sessions)} turns of {len(stories)} stories")
        report.ingest_s = await publish_and_wait(client, sessions, timeout_s=3600)
        progress(f"asking {sum(len(s.questions) for s in stories)} questions")
        for story in stories:
            for question in story.questions:
                reply = await client.recall(RecallRequest(query=question.question, user_id=story.user_id(run_id),
                                                          k=k, token_budget=token_budget, mode=mode))
                report.judged.append(judge(story, question, _hits(reply.entries, prefix), reply.context_tokens))
    return summarise(report)


def _answer(j: Judged) -> curve.Answer:
    return curve.Answer(type=j.type, found=j.all_found, tokens=j.context_tokens, in_order=j.in_order)


def _hits(entries: Sequence[RecalledEntry | MemoryEntry], prefix: str) -> list[Hit]:
    """Recalled (or a baseline's) entries as the judge reads them, the run's prefix taken off their conversations."""
    return [Hit(conversation_id=e.conversation_id.removeprefix(prefix), turn_ids=e.source_turn_ids,
                occurred_at=e.occurred_at) for e in entries]


async def _baseline(store: Store, embedder: Embedder, bm25: Bm25Encoder, settings: Settings,
                    baseline: baselines.Baseline, stories: Sequence[Story], budgets: Sequence[int],
                    run_id: str) -> dict[int, list[Judged]]:
    """One baseline over every story: six-turn windows of each session (dated), stored under the story's user, each
    question searched within its user and packed into every budget."""
    tenant = f"curve-{baseline.name}-{run_id}"
    for story in stories:
        await baselines.index(store, embedder, bm25, tenant, baselines.windows(story.turns(run_id)), story.id,
                              user_id=story.user_id(run_id))
    out: dict[int, list[Judged]] = {b: [] for b in budgets}
    for story in stories:
        vectors = await embedder.queries([q.question for q in story.questions])
        scope = Scope(tenant_id=tenant, user_id=story.user_id(run_id))
        for question, dense in zip(story.questions, vectors, strict=True):
            hits = await baselines.ranked(store, bm25, scope, baseline, question.question, dense, baselines.TOP,
                                          settings.rrf_k)
            for budget, (kept, tokens) in baselines.packed(hits, budgets, settings.tokenizer).items():
                out[budget].append(judge(story, question, _hits([h.entry for h in kept], f"{run_id}-"), tokens))
    return out


async def run_curve(client_for: Callable[[str], Awaitable[MemoryClient]], stories: Sequence[Story], split: str,
                    budgets: Sequence[int], mode: str, embedder: Embedder, settings: Settings,
                    progress: Callable[[str], None] = lambda _: None) -> curve.Curve:
    """Recall against tokens on a half of the stories: published once, every question asked of engram at every
    budget (no k), and of the curve's baselines (the same windows over each story's sessions) within each budget."""
    run_id = uuid.uuid4().hex[:8]
    prefix = f"{run_id}-"
    judged: dict[tuple[str, int], list[Judged]] = {}
    latencies: list[float] = []
    async with await client_for(f"curve-multihop-{split}-{run_id}") as client:
        sessions = [s for story in stories for s in story.turns(run_id)]
        progress(f"publishing {sum(len(s) for s in sessions)} turns of {len(stories)} stories")
        ingest_s = await publish_and_wait(client, sessions, timeout_s=3600)
        progress(f"asking {sum(len(s.questions) for s in stories)} questions within budgets {list(budgets)}")
        for budget in budgets:
            for story in stories:
                for question in story.questions:
                    started = time.perf_counter()
                    reply = await client.recall(RecallRequest(query=question.question, user_id=story.user_id(run_id),
                                                              token_budget=budget, mode=mode))
                    latencies.append((time.perf_counter() - started) * 1e3)
                    judged.setdefault((ENGRAM, budget), []).append(
                        judge(story, question, _hits(reply.entries, prefix), reply.context_tokens))
    bm25 = Bm25Encoder(settings.bm25_language)
    with tempfile.TemporaryDirectory(prefix="engram-baselines-") as folder:
        store = EdgeStore.open(Path(folder), embedder.dim)
        try:
            for baseline in baselines.CURVE_BASELINES:
                progress(f"baseline {baseline.label}")
                for budget, rows in (await _baseline(store, embedder, bm25, settings, baseline, stories, budgets,
                                                     run_id)).items():
                    judged[(baseline.name, budget)] = rows
        finally:
            await store.close()
    systems = {ENGRAM: ENGRAM_LABEL.format(mode=mode), **{b.name: b.label for b in baselines.CURVE_BASELINES}}
    types: list[QuestionType] = ["multi_hop", "ordering", "single_hop"]
    return curve.Curve(dataset=f"multi-session stories, {split} half", mode=mode, budgets=list(budgets),
                       systems=systems, types=list(types),
                       points=[curve.point(system, budget, [_answer(j) for j in judged.get((system, budget), [])])
                               for system in systems for budget in budgets],
                       ingest_s=ingest_s, latency=percentiles(latencies))
