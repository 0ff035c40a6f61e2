"""Everything a service needs, opened once by the CLI (or a test) and handed to the apps."""
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext

from shared import streams
from shared.compress import Compressor, OfflineCompressor
from shared.embedding import Bm25Encoder, Embedder, open_embedder
from shared.errors import Unavailable
from shared.memorize import Writer
from shared.retrieval import Retrieval
from shared.settings import Settings
from shared.store import Store, open_store
from shared.working_memory import WorkingMemory

log = logging.getLogger("engram.deps")


@dataclass(frozen=True)
class Deps:
    """Opened dependencies. The query and passage embedders are separate so a recall never queues behind a batch."""

    settings: Settings
    nc: Client
    js: JetStreamContext
    store: Store
    query_embedder: Embedder
    passage_embedder: Embedder
    sparse: Bm25Encoder
    compressor: Compressor
    wm: WorkingMemory

    @property
    def writer(self) -> Writer:
        """What writing entries needs."""
        return Writer(self.compressor, self.passage_embedder, self.sparse, self.store)

    @property
    def retrieval(self) -> Retrieval:
        """What recall needs."""
        return Retrieval(self.store, self.query_embedder, self.sparse, self.settings)

    async def ready(self) -> str | None:
        """None if the broker answers, else why not (for /readyz)."""
        if not self.nc.is_connected:
            return "not connected to NATS"
        return None


async def _log_error(exc: Exception) -> None:
    log.warning("nats: %s", exc)  # one line; nats-py's default prints a traceback per reconnect attempt


async def connect(url: str, name: str) -> Client:
    """A NATS connection that keeps reconnecting, with a clear error when the server is not there at all."""
    try:
        return await nats.connect(url, name=name, max_reconnect_attempts=-1, connect_timeout=5,
                                  allow_reconnect=True, error_cb=_log_error)
    except Exception as exc:
        raise Unavailable(f"cannot connect to NATS at {url}: {exc}; is it running? "
                          "(unset ENGRAM_NATS_URL to start the embedded server)") from exc


async def close(nc: Client) -> None:
    """Send what is buffered, then close (consumers are stopped by now, so there is nothing to drain)."""
    with contextlib.suppress(Exception):
        await nc.flush(timeout=2)
    await nc.close()


@contextlib.asynccontextmanager
async def open_deps(settings: Settings, nats_url: str, *, name: str = "engram",
                    store: Store | None = None) -> AsyncIterator[Deps]:
    """Open NATS (streams, KV), the store and the embedders; close them all on exit.

    Args:
        store: an already opened store to share (several app instances in one process over Qdrant Edge).
    """
    nc = await connect(nats_url, name)
    query_embedder = open_embedder(settings)
    passage_embedder = open_embedder(settings)
    owned_store = store is None
    try:
        js = nc.jetstream()
        await streams.ensure(js, settings.subject_prefix)
        wm = await WorkingMemory.open(js, settings.subject_prefix, ttl_s=settings.working_memory_ttl_s)
        opened = store or await open_store(settings, query_embedder.dim)
        try:
            yield Deps(settings=settings, nc=nc, js=js, store=opened, query_embedder=query_embedder,
                       passage_embedder=passage_embedder, sparse=Bm25Encoder(settings.bm25_language),
                       compressor=OfflineCompressor(settings.context_turn_chars, settings.bm25_language), wm=wm)
        finally:
            if owned_store:
                await opened.close()
    finally:
        await query_embedder.close()
        await passage_embedder.close()
        await close(nc)
