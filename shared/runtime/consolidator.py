"""What a consolidator opens: its FastStream broker (whose one connection also reaches working memory and the
streams), over a store its caller shares. No embedding model: Forget and its check need none."""
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from faststream.nats import NatsBroker

from shared.consolidation.forget import Places
from shared.embedding import embedding_dim
from shared.ingest.working_memory import WorkingMemory
from shared.messaging import connection, events, streams
from shared.settings import Settings
from shared.store import Store


@dataclass(frozen=True)
class ConsolidatorDeps:
    """The opened dependencies of one consolidator replica."""

    settings: Settings
    broker: NatsBroker
    places: Places

    async def ready(self) -> str | None:
        """None if this replica can answer, else why not (for /readyz)."""
        return None if self.broker.connection.is_connected else "consolidator: not connected to NATS"


@contextlib.asynccontextmanager
async def open_consolidator(settings: Settings, nats_url: str, *, store: Store,
                            name: str = "engram-consolidator") -> AsyncIterator[ConsolidatorDeps]:
    """Connect the broker and open working memory and the streams over it; close all on exit."""
    broker, nc = await connection.open_broker(nats_url, name)
    try:
        js = nc.jetstream()
        await streams.ensure(js, settings.subject_prefix)
        working_memory = await WorkingMemory.open(js, settings.subject_prefix, ttl_s=settings.working_memory_ttl_s)
        places = Places(store=store, working_memory=working_memory, js=js, prefix=settings.subject_prefix,
                        publish=events.publisher(nc, settings.subject_prefix), dim=embedding_dim(settings))
        yield ConsolidatorDeps(settings=settings, broker=broker, places=places)
    finally:
        await broker.stop()
