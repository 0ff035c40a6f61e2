"""What an ingestor opens: one NATS connection (streams, working memory, events), the tenants and their quotas, the
passage embedder, the compressor and BM25, over a store its caller shares."""
import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from nats.aio.client import Client
from nats.js import JetStreamContext

from engram_client import connection
from shared.compress.choose import compression
from shared.compress.workers import TextWorkers
from shared.embedding import WARM_UP_TIMEOUT_S, Bm25Encoder, Embedder, open_embedder
from shared.ingest.writer import Writer
from shared.llm import LlmClient
from shared.messaging import streams
from shared.messaging.connection import server_info
from shared.messaging.security import nats_security
from shared.settings import Settings
from shared.store import Store
from shared.tenancy.known import KnownTenants
from shared.working_memory import WorkingMemory
from shared.working_memory import buffer as buffers

log = logging.getLogger("engram.ingestor")


@dataclass(frozen=True)
class IngestorDeps:
    """The opened dependencies of one ingestor replica."""

    settings: Settings
    nc: Client
    js: JetStreamContext
    working_memory: WorkingMemory
    writer: Writer
    name: str  # of this replica's NATS connection
    tenants: KnownTenants
    replicas: int  # of the streams it makes
    legacy: bool   # the legacy stream of every tenant's turns exists (no tenant streams are made meanwhile)
    llm: LlmClient | None = None

    async def ready(self) -> str | None:
        """None if this replica can work, else why not (for /readyz)."""
        if not self.nc.is_connected:
            return "ingestor: not connected to NATS"
        return self.writer.embedder.problem()


@contextlib.asynccontextmanager
async def open_ingestor(settings: Settings, nats_url: str, *, store: Store, llm: LlmClient | None = None,
                        name: str = "engram-ingestor") -> AsyncIterator[IngestorDeps]:
    """Open what an ingestor uses and close it on exit (the store belongs to the caller)."""
    nc = await connection.connect(nats_url, name, security=nats_security(settings))
    embedder: Embedder | None = None
    workers: TextWorkers | None = None
    try:
        embedder = open_embedder(settings)
        await _warm_up(embedder)
        js = nc.jetstream()
        replicas = streams.replicas(server_info(nc), settings.nats_replicas)
        await streams.ensure(js, settings.subject_prefix, replicas, settings.dlq_per_tenant)
        legacy = await streams.legacy(js, settings.subject_prefix)
        if legacy is not None:
            log.warning("stream %s holds every tenant's turns (an engram from before): engram keeps consuming it, "
                        "but de-duplication, storage quotas and ingestion are not per tenant until it is migrated; "
                        "see docs/operations/upgrades.md", streams.legacy_turns_stream(settings.subject_prefix))
        working_memory = await WorkingMemory.open(js, settings.subject_prefix, ttl_s=settings.working_memory_ttl_s,
                                                  replicas=replicas)
        buffers.check_fits(window_turns=settings.window_turns, recent_turns=settings.recent_turns,
                           max_pending_windows=settings.max_pending_windows, max_payload=nc.max_payload)
        workers = TextWorkers(settings.text_workers, settings.window_text_budget_s, settings.context_turn_chars,
                              settings.bm25_language)
        compressor, facts = compression(settings, llm, workers)
        writer = Writer(compressor, embedder, Bm25Encoder(settings.bm25_language), store, facts=facts)
        yield IngestorDeps(settings=settings, nc=nc, js=js, working_memory=working_memory, writer=writer, name=name,
                           tenants=KnownTenants.from_settings(settings), replicas=replicas,
                           legacy=legacy is not None, llm=llm)
    finally:
        if workers is not None:
            await asyncio.to_thread(workers.close)
        if embedder is not None:
            await embedder.close()
        await connection.close(nc)


async def _warm_up(embedder: Embedder) -> None:
    """Load the passage model now, so /readyz knows at once if it cannot (never blocking start-up for long)."""
    try:
        await asyncio.wait_for(embedder.passages(["warm up"]), WARM_UP_TIMEOUT_S)
    except Exception as exc:
        log.warning("passage embedder warm-up failed (%s: %s); writes will say so until it works",
                    type(exc).__name__, exc)
