"""Running services: embedded or external NATS, one store per process, HTTP endpoints, graceful shutdown."""
import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from faststream.nats import NatsBroker

from services.ingestor import app as ingestor_app
from services.ingestor.app import Ingestor
from services.retriever import app as retriever_app
from shared import http, nats_server
from shared.deps import Deps, open_deps
from shared.embedding import embedding_dim
from shared.retrieval import warm_up
from shared.settings import Settings
from shared.store import Store, open_store

log = logging.getLogger("engram.runtime")


@dataclass
class Running:
    """What a running stack exposes to its caller (the CLI prints it, tests use it)."""

    nats_url: str
    http_port: int
    deps: list[Deps] = field(default_factory=list)
    ingestors: list[Ingestor] = field(default_factory=list)
    brokers: list[NatsBroker] = field(default_factory=list)
    served: list[Counter[str]] = field(default_factory=list)  # per retriever instance


@contextlib.asynccontextmanager
async def nats_url_for(settings: Settings) -> AsyncIterator[str]:
    """ENGRAM_NATS_URL when set, else an embedded nats-server in data_dir/nats for the block's duration."""
    if settings.nats_url:
        yield settings.nats_url
        return
    async with nats_server.running(settings.nats_store_dir, settings.nats_port) as server:
        yield server.url


@contextlib.asynccontextmanager
async def running(settings: Settings, *, ingestors: int = 1, retrievers: int = 1,
                  nats_url: str | None = None) -> AsyncIterator[Running]:
    """Start the asked number of ingestor and retriever instances, each with its own NATS connection.

    Instances in one process share one store (Qdrant Edge allows one process per folder). On exit, consumers
    stop first, sealed windows are written, then connections close: nothing acknowledged is lost.
    """
    async with contextlib.AsyncExitStack() as stack:
        url = nats_url if nats_url is not None else await stack.enter_async_context(nats_url_for(settings))
        store: Store = await open_store(settings, embedding_dim(settings))
        stack.push_async_callback(store.close)
        state = Running(nats_url=url, http_port=0)
        for i in range(ingestors):
            deps = await stack.enter_async_context(open_deps(settings, url, name=f"engram-ingestor-{i}", store=store))
            state.deps.append(deps)
            state.ingestors.append(Ingestor(settings, deps, ingestor_app.build_closer(settings, deps)))
        for i in range(retrievers):
            deps = await stack.enter_async_context(open_deps(settings, url, name=f"engram-retriever-{i}", store=store))
            await warm_up(deps.retrieval)
            state.deps.append(deps)
            state.served.append(Counter())
            state.brokers.append(retriever_app.build_broker(settings, deps, url, state.served[-1]))
        for ingestor in state.ingestors:
            await ingestor.start()
        for broker in state.brokers:
            await broker.start()

        async def ready() -> str | None:
            for deps in state.deps:
                problem = await deps.ready()
                if problem:
                    return problem
            return None

        state.http_port = await stack.enter_async_context(http.serving(settings.http_host, settings.http_port, ready))
        try:
            yield state
        finally:
            for broker in state.brokers:
                await broker.stop()
            for ingestor in state.ingestors:
                await ingestor.stop()


async def serve_until_signalled(settings: Settings, *, ingestors: int, retrievers: int,
                                on_ready: Callable[[Running], Awaitable[None] | None]) -> None:
    """Run services until SIGINT or SIGTERM, then shut down cleanly."""
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with running(settings, ingestors=ingestors, retrievers=retrievers) as state:
        result = on_ready(state)
        if asyncio.iscoroutine(result):
            await result
        await stop.wait()
        log.info("shutting down")
