"""What a consolidator opens: its FastStream broker (whose one connection also reaches working memory, the streams
and the lease buckets), BM25 for profiles, over a store its caller shares. No embedding model at start: the jobs
reuse the vectors stored with each entry; a forget that finds the person's words in someone else's episode opens
the ingestors' compressor and embedder to write it again (rewrite.py), an import opens the same embedder (one per
replica, on first use), and a rebuild opens one for its duration."""
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any

from faststream.nats import NatsBroker

from engram_client.contract import ConsolidateRequest, Forget, RebuildReport
from engram_client.errors import Unavailable
from shared.consolidation.fence import FencedStore
from shared.consolidation.forget import Places
from shared.consolidation.lease import Leases
from shared.consolidation.requests import forget_then_rescan
from shared.consolidation.rewrite import Rederive
from shared.consolidation.run import Consolidation, consolidate
from shared.consolidation.schedule import Scheduler
from shared.embedding import Bm25Encoder, OnDemandEmbedder, embedding_dim, open_embedder
from shared.llm import LlmClient
from shared.messaging import connection, events, streams
from shared.messaging.security import nats_security
from shared.rebuild.run import LOCK, RebuildDeps, announce_forget
from shared.settings import Settings
from shared.store import Store, builds
from shared.working_memory import WorkingMemory


@dataclass(frozen=True)
class ConsolidatorDeps:
    """The opened dependencies of one consolidator replica."""

    settings: Settings
    broker: NatsBroker
    places: Places
    consolidation: Consolidation
    leases: Leases
    embedding: OnDemandEmbedder  # the dense embedder, opened by the first rewrite or import this replica serves
    llm: LlmClient | None = None

    @property
    def scheduler(self) -> Scheduler:
        """This replica's share of the schedule."""
        return Scheduler(self.consolidation, self.leases, self.settings.consolidate_interval_s)

    async def announce_forget(self, tenant: str, request: Forget) -> None:
        """Tell a rebuild running anywhere about a forget this replica answered."""
        await announce_forget(self.broker.connection, self.settings.subject_prefix, tenant, request)

    def for_rebuild(self) -> RebuildDeps:
        """What a rebuild run by this replica uses: its store, stream and connection, its tenant leases around each
        tenant's consolidation of the new build and each forget applied to it, and the cluster-wide rebuild lease.
        """
        wait_s = self.settings.lease_ttl_s

        async def leased(tenant: str, job: Callable[[], Coroutine[Any, Any, object]]) -> object:
            result = await self.leases.run(tenant, job, wait_s=wait_s)
            if result is None:
                raise Unavailable(f"tenant {tenant!r}'s lease stayed taken for {wait_s:g} s; the rebuild stops")
            return result

        async def consolidate_on(store: Store, tenant: str, request: ConsolidateRequest) -> object:
            return await leased(tenant, lambda: consolidate(replace(self.consolidation, store=FencedStore(store)),
                                                            tenant, request))

        async def forget_on(store: Store, tenant: str, request: Forget) -> object:
            # Into the new build an episode holding the person's words is deleted, not written again: the build may
            # embed with another model than this replica's.
            return await leased(tenant, lambda: forget_then_rescan(replace(self.places, store=store, rederive=None),
                                                                   self.leases, tenant, request))

        async def lock(job: Callable[[], Coroutine[Any, Any, RebuildReport]]) -> RebuildReport | None:
            return await self.leases.run(LOCK, job)

        nc = self.broker.connection
        return RebuildDeps(settings=self.settings, nc=nc, js=self.places.js, live=self.places.store, llm=self.llm,
                           consolidate=consolidate_on, forget_on=forget_on, lock=lock)

    async def ready(self) -> str | None:
        """None if this replica can answer, else why not (for /readyz)."""
        return None if self.broker.connection.is_connected else "consolidator: not connected to NATS"


@contextlib.asynccontextmanager
async def open_consolidator(settings: Settings, nats_url: str, *, store: Store, llm: LlmClient | None = None,
                            name: str = "engram-consolidator") -> AsyncIterator[ConsolidatorDeps]:
    """Connect the broker and open working memory, the streams and the leases over it; close all on exit."""
    broker, nc = await connection.open_broker(nats_url, name, nats_security(settings))
    embedding = OnDemandEmbedder(lambda: open_embedder(settings))
    try:
        js = nc.jetstream()
        replicas = streams.replicas(connection.server_info(nc), settings.nats_replicas)
        await streams.ensure(js, settings.subject_prefix, replicas, settings.dlq_per_tenant)
        working_memory = await WorkingMemory.open(js, settings.subject_prefix, ttl_s=settings.working_memory_ttl_s,
                                                  replicas=replicas)
        publish = events.publisher(nc, settings.subject_prefix)
        places = Places(store=store, working_memory=working_memory, js=js, prefix=settings.subject_prefix,
                        publish=publish, dim=embedding_dim(settings), rederive=Rederive(settings, embedding, llm),
                        retired=lambda: builds.drop_retired(settings, store))
        # Its writes are fenced by the tenant's lease (a run that lost it while paused writes nothing more).
        consolidation = Consolidation(store=FencedStore(store), publish=publish,
                                      sparse=Bm25Encoder(settings.bm25_language), settings=settings, llm=llm)
        holder = f"{socket.gethostname()}:{os.getpid()}:{name}"
        leases = await Leases.open(js, settings.subject_prefix, holder, settings.lease_ttl_s, replicas)
        yield ConsolidatorDeps(settings=settings, broker=broker, places=places, consolidation=consolidation,
                               leases=leases, embedding=embedding, llm=llm)
    finally:
        await connection.stop_broker(broker)
        await embedding.close()
