"""`engram eval locomo`: publish each conversation through NATS, ask every question, score engram and baselines."""
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from engram_client import MemoryClient
from engram_client.contract import RecallRequest
from shared.embedding import Bm25Encoder, Embedder
from shared.evaluation import baselines, curve, locomo
from shared.evaluation.latency import Percentiles, percentiles
from shared.evaluation.machine import describe
from shared.evaluation.scoring import Row, SystemScore, row, summarise
from shared.evaluation.stories import publish_and_wait
from shared.runtime import metrics
from shared.settings import Settings
from shared.store import EdgeStore
from shared.text import tokens

ENGRAM = "engram"
ENGRAM_LABEL = "engram ({mode})"


class Ingest(BaseModel):
    """Publish → every turn recallable, for one conversation."""

    conversation: str
    turns: int
    seconds: float
    turns_per_s: float


class EvalReport(BaseModel):
    """Everything one evaluation run measured."""

    machine: dict[str, object] = Field(default_factory=describe)
    mode: str = "fast"
    ks: list[int] = Field(default_factory=list)
    token_budget: int | None = None
    scores: list[SystemScore] = Field(default_factory=list)
    latency: Percentiles = Field(default_factory=Percentiles)  # recall round trips as the client saw them (ms)
    ingest: list[Ingest] = Field(default_factory=list)
    conversation_tokens: dict[str, int] = Field(default_factory=dict)
    # Chat-model tokens by conversation and purpose, counted by this process's metrics (an in-process stack;
    # services elsewhere count in their own /metrics). Empty without a model.
    llm_tokens: dict[str, dict[str, int]] = Field(default_factory=dict)


def conversation_tokens(conversation: locomo.Conversation, encoding: str) -> int:
    """Tokens of the whole conversation as plain lines (what 'send everything' would cost)."""
    return tokens.count("\n".join(f"{t.speaker}: {t.text}" for t in conversation.turns), encoding)


async def _engram(client: MemoryClient, conversation: locomo.Conversation, ks: list[int], mode: str,
                  token_budget: int | None, latencies: list[float]) -> dict[int, list[Row]]:
    out: dict[int, list[Row]] = {k: [] for k in ks}
    for question in conversation.scored():
        for k in ks:
            started = time.perf_counter()
            reply = await client.recall(RecallRequest(query=question.question, user_id=conversation.user_id, k=k,
                                                      mode=mode, token_budget=token_budget))
            latencies.append((time.perf_counter() - started) * 1e3)
            out[k].append(row(question, [e.source_turn_ids for e in reply.entries], reply.context_tokens))
    return out


async def run(client_for: Callable[[str], Awaitable[MemoryClient]], settings: Settings, files: list[Path],
              ks: list[int], mode: str, embedder: Embedder, token_budget: int | None = None,
              progress: Callable[[str], None] = lambda _: None) -> EvalReport:
    """Evaluate engram (over NATS, via `client_for(tenant)`) and every baseline (in-process) on each file."""
    report = EvalReport(mode=mode, ks=ks, token_budget=token_budget)
    bm25 = Bm25Encoder(settings.bm25_language)
    latencies: list[float] = []
    run_id = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="engram-baselines-") as folder:
        baseline_store = EdgeStore.open(Path(folder), embedder.dim)
        try:
            for path in files:
                conversation = locomo.load(path)
                name = conversation.sample_id
                total = conversation_tokens(conversation, settings.tokenizer)
                report.conversation_tokens[name] = total
                tenant = f"eval-{name}-{run_id}"
                progress(f"{name}: publishing {len(conversation.turns)} turns")
                tokens_before = metrics.llm_tokens_by_purpose()
                async with await client_for(tenant) as client:
                    seconds = await publish_and_wait(client, conversation.sessions)
                    report.ingest.append(Ingest(conversation=name, turns=len(conversation.turns), seconds=seconds,
                                                turns_per_s=len(conversation.turns) / seconds))
                    progress(f"{name}: asking {len(conversation.scored())} questions at k={ks}")
                    rows = await _engram(client, conversation, ks, mode, token_budget, latencies)
                used = {p: n - tokens_before.get(p, 0) for p, n in metrics.llm_tokens_by_purpose().items()}
                if any(used.values()):
                    report.llm_tokens[name] = {p: n for p, n in sorted(used.items()) if n}
                report.scores += [summarise(ENGRAM, name, k, rows[k], total) for k in ks]
                for baseline in baselines.BASELINES:
                    progress(f"{name}: baseline {baseline.label}")
                    b_tenant = f"{baseline.name}-{name}-{run_id}".replace("_", "-")
                    await baselines.index(baseline_store, embedder, bm25, b_tenant, baseline.units(conversation),
                                          f"{name}-{baseline.name}")
                    b_rows = await baselines.answer(baseline_store, embedder, bm25, b_tenant, baseline,
                                                    conversation.scored(), ks, settings.rrf_k, settings.tokenizer)
                    report.scores += [summarise(baseline.name, name, k, b_rows[k], total) for k in ks]
        finally:
            await baseline_store.close()
    report.latency = percentiles(latencies)
    return report



def _answers(rows: list[Row]) -> list[curve.Answer]:
    return [curve.Answer(type=locomo.CATEGORY_NAMES[r.category], found=r.all_hit, tokens=r.tokens) for r in rows]


async def run_curve(client_for: Callable[[str], Awaitable[MemoryClient]], settings: Settings, files: list[Path],
                    budgets: Sequence[int], mode: str, embedder: Embedder,
                    progress: Callable[[str], None] = lambda _: None) -> curve.Curve:
    """Recall against tokens: each conversation ingested once, then every question asked of engram at every budget
    (no k: the budget alone decides how much comes back) and of the curve's baselines packed into the same budgets."""
    bm25 = Bm25Encoder(settings.bm25_language)
    run_id = uuid.uuid4().hex[:8]
    answers: dict[tuple[str, int], list[curve.Answer]] = {}
    latencies: list[float] = []
    ingest_s = 0.0
    names = []
    with tempfile.TemporaryDirectory(prefix="engram-baselines-") as folder:
        baseline_store = EdgeStore.open(Path(folder), embedder.dim)
        try:
            for path in files:
                conversation = locomo.load(path)
                name = conversation.sample_id
                names.append(name)
                questions = conversation.scored()
                progress(f"{name}: publishing {len(conversation.turns)} turns")
                async with await client_for(f"curve-{name}-{run_id}") as client:
                    ingest_s += await publish_and_wait(client, conversation.sessions)
                    progress(f"{name}: asking {len(questions)} questions within budgets {list(budgets)}")
                    for budget in budgets:
                        rows = []
                        for question in questions:
                            started = time.perf_counter()
                            reply = await client.recall(RecallRequest(query=question.question,
                                                                      user_id=conversation.user_id,
                                                                      token_budget=budget, mode=mode))
                            latencies.append((time.perf_counter() - started) * 1e3)
                            rows.append(row(question, [e.source_turn_ids for e in reply.entries],
                                            reply.context_tokens))
                        answers.setdefault((ENGRAM, budget), []).extend(_answers(rows))
                for baseline in baselines.CURVE_BASELINES:
                    progress(f"{name}: baseline {baseline.label}")
                    b_tenant = f"curve-{baseline.name}-{name}-{run_id}".replace("_", "-")
                    await baselines.index(baseline_store, embedder, bm25, b_tenant, baseline.units(conversation),
                                          f"{name}-{baseline.name}")
                    by_budget = await baselines.answer_within(baseline_store, embedder, bm25, b_tenant, baseline,
                                                              questions, budgets, settings.rrf_k, settings.tokenizer)
                    for budget, b_rows in by_budget.items():
                        answers.setdefault((baseline.name, budget), []).extend(_answers(b_rows))
        finally:
            await baseline_store.close()
    systems = {ENGRAM: ENGRAM_LABEL.format(mode=mode), **{b.name: b.label for b in baselines.CURVE_BASELINES}}
    return curve.Curve(dataset=f"LoCoMo {', '.join(names)}", mode=mode, budgets=list(budgets), systems=systems,
                       types=[locomo.CATEGORY_NAMES[c] for c in locomo.SCORED_CATEGORIES],
                       points=[curve.point(system, budget, answers.get((system, budget), []))
                               for system in systems for budget in budgets],
                       ingest_s=ingest_s, latency=percentiles(latencies))
