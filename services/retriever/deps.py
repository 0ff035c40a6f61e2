"""What a retriever opens: its FastStream broker (whose one connection also reads working memory), the query
embedder and BM25, over a store its caller shares. No passage model, no compressor, no second connection."""
import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from faststream.nats import NatsBroker

from shared.embedding import Bm25Encoder, Embedder, open_embedder
from shared.llm import LlmClient
from shared.messaging import connection, streams
from shared.messaging.security import nats_security
from shared.retrieval import Retrieval, warm_up
from shared.retrieval.fit import REPLY_HEADROOM_BYTES
from shared.retrieval.summary import Summarizer
from shared.retrieval.usage import UsageRecorder
from shared.settings import Settings
from shared.store import Store
from shared.working_memory import WorkingMemory


@dataclass(frozen=True)
class RetrieverDeps:
    """The opened dependencies of one retriever replica."""

    settings: Settings
    broker: NatsBroker
    working_memory: WorkingMemory
    retrieval: Retrieval
    summarizer: Summarizer

    async def ready(self) -> str | None:
        """None if this replica can answer, else why not (for /readyz)."""
        if not self.broker.connection.is_connected:
            return "retriever: not connected to NATS"
        return self.retrieval.embedder.problem()


@contextlib.asynccontextmanager
async def open_retriever(settings: Settings, nats_url: str, *, store: Store, llm: LlmClient | None = None,
                         name: str = "engram-retriever") -> AsyncIterator[RetrieverDeps]:
    """Connect the broker, open the working-memory bucket over it, load the query model; close all on exit."""
    broker, nc = await connection.open_broker(nats_url, name, nats_security(settings))
    embedder: Embedder | None = None
    try:
        embedder = open_embedder(settings)
        replicas = streams.replicas(connection.server_info(nc), settings.nats_replicas)
        working_memory = await WorkingMemory.open(nc.jetstream(), settings.subject_prefix,
                                                  ttl_s=settings.working_memory_ttl_s, replicas=replicas)
        usage = UsageRecorder(store, settings.usage_flush_s)
        retrieval = Retrieval(store, embedder, Bm25Encoder(settings.bm25_language), settings,
                              max_reply_bytes=nc.max_payload - REPLY_HEADROOM_BYTES, usage=usage, llm=llm,
                              deep_slots=asyncio.Semaphore(max(1, settings.recall_workers // 2)))
        summarizer = Summarizer(working_memory, settings, llm)
        await warm_up(retrieval)
        stopping = asyncio.Event()
        recorder = asyncio.create_task(usage.run(stopping), name="recall-usage")
        try:
            yield RetrieverDeps(settings=settings, broker=broker, working_memory=working_memory,
                                retrieval=retrieval, summarizer=summarizer)
        finally:
            stopping.set()
            await asyncio.gather(recorder, return_exceptions=True)
            await summarizer.settle()
    finally:
        await connection.stop_broker(broker)
        if embedder is not None:
            await embedder.close()
