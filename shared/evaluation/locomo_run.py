"""`engram eval locomo`: publish each conversation through NATS, ask every question, score engram and baselines."""
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from pydantic import BaseModel, Field

from engram_client import MemoryClient, publish_sessions, wait_until_stored
from engram_client.contract import RecallRequest
from shared.embedding import Bm25Encoder, Embedder
from shared.evaluation import baselines, locomo
from shared.evaluation.latency import Percentiles, percentiles
from shared.evaluation.machine import describe
from shared.evaluation.scoring import Row, SystemScore, row, summarise
from shared.runtime import metrics
from shared.settings import Settings
from shared.store import EdgeStore
from shared.text import tokens

ENGRAM = "engram"


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
                    started = time.perf_counter()
                    await publish_sessions(client, conversation.sessions)
                    await wait_until_stored(client, conversation.turns, timeout_s=1800)
                    seconds = time.perf_counter() - started
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

