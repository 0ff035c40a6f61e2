"""What a retriever opens: its FastStream broker (whose one connection also reads working memory), the query
embedder and BM25, over a store its caller shares. No passage model, no compressor, no second connection."""
import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from faststream.nats import NatsBroker

from shared.embedding import Bm25Encoder, Embedder, open_embedder
from shared.errors import Unavailable
from shared.ingest.working_memory import WorkingMemory
from shared.messaging import connection
from shared.retrieval import Retrieval, warm_up
from shared.retrieval.fit import REPLY_HEADROOM_BYTES
from shared.settings import Settings
from shared.store import Store


@dataclass(frozen=True)
class RetrieverDeps:
    """The opened dependencies of one retriever replica."""

    settings: Settings
    broker: NatsBroker
    working_memory: WorkingMemory
    retrieval: Retrieval

    async def ready(self) -> str | None:
        """None if this replica can answer, else why not (for /readyz)."""
        if not self.broker.connection.is_connected:
            return "retriever: not connected to NATS"
        return self.retrieval.embedder.problem()


@contextlib.asynccontextmanager
async def open_retriever(settings: Settings, nats_url: str, *, store: Store,
                         name: str = "engram-retriever") -> AsyncIterator[RetrieverDeps]:
    """Connect the broker, open the working-memory bucket over it, load the query model; close all on exit."""
    broker = NatsBroker(nats_url, name=name, max_reconnect_attempts=-1, connect_timeout=2,
                        reconnect_time_wait=connection.FIRST_CONNECT_RETRY_S,
                        reconnect_to_server_handler=connection.choose_server,
                        # FastStream's access log at DEBUG, through the service's own logging (not FastStream's
                        # handler): every handled request already gets engram's one line.
                        log_level=logging.DEBUG, logger=logging.getLogger("faststream"))
    try:
        await connection.check_listening(nats_url)
        nc = await asyncio.wait_for(broker.connect(), connection.FIRST_CONNECT_TIMEOUT_S)
    except Unavailable:
        await broker.stop()
        raise
    except Exception as exc:
        await broker.stop()
        raise Unavailable(f"cannot connect to NATS at {nats_url} ({exc or type(exc).__name__}); is it running?") \
            from exc
    embedder: Embedder | None = None
    try:
        embedder = open_embedder(settings)
        working_memory = await WorkingMemory.open(nc.jetstream(), settings.subject_prefix,
                                                  ttl_s=settings.working_memory_ttl_s)
        retrieval = Retrieval(store, embedder, Bm25Encoder(settings.bm25_language), settings,
                              max_reply_bytes=nc.max_payload - REPLY_HEADROOM_BYTES)
        await warm_up(retrieval)
        yield RetrieverDeps(settings=settings, broker=broker, working_memory=working_memory, retrieval=retrieval)
    finally:
        await broker.stop()
        if embedder is not None:
            await embedder.close()
