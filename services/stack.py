"""Running services in one process: embedded or external NATS, one store, HTTP endpoints, graceful shutdown."""
import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TypeVar

from services.consolidator import app as consolidator
from services.consolidator.deps import ConsolidatorDeps, open_consolidator
from services.ingestor import app as ingestor
from services.ingestor.deps import IngestorDeps, open_ingestor
from services.retriever import app as retriever
from services.retriever.deps import RetrieverDeps, open_retriever
from services.service import Opened, Service
from shared.embedding import embedding_dim
from shared.llm import open_llm
from shared.messaging import nats_server
from shared.runtime import http
from shared.runtime.health import Health
from shared.settings import Settings
from shared.store import Store, open_store
from shared.tracing.export import exporting

log = logging.getLogger("engram.stack")
D = TypeVar("D", bound=Opened)
S = TypeVar("S", bound=Service)


@dataclass
class Running:
    """What a running stack exposes to its caller (the CLI prints it, tests use it)."""

    nats_url: str
    store: Store
    health: Health
    http_port: int = 0
    ingestors: list[ingestor.Ingestor] = field(default_factory=list)
    retrievers: list[retriever.Retriever] = field(default_factory=list)
    consolidators: list[consolidator.Consolidator] = field(default_factory=list)
    ingestor_deps: list[IngestorDeps] = field(default_factory=list)
    retriever_deps: list[RetrieverDeps] = field(default_factory=list)
    consolidator_deps: list[ConsolidatorDeps] = field(default_factory=list)


@contextlib.asynccontextmanager
async def nats_url_for(settings: Settings) -> AsyncIterator[str]:
    """ENGRAM_NATS_URL when set, else an embedded nats-server in data_dir/nats for the block's duration."""
    if settings.nats_url:
        yield settings.nats_url
        return
    async with nats_server.running(settings.nats_store_dir, settings.nats_port, settings.nats_config) as server:
        yield server.url


@contextlib.asynccontextmanager
async def running(settings: Settings, *, ingestors: int = 1, retrievers: int = 1, consolidators: int = 1,
                  nats_url: str | None = None) -> AsyncIterator[Running]:
    """Start the asked number of ingestor, retriever and consolidator instances, each with its own NATS connection.

    Instances in one process share one store (Qdrant Edge allows one process per folder). On exit, consumers
    stop first, sealed windows are written, then connections close: nothing acknowledged is lost.
    """
    async with contextlib.AsyncExitStack() as stack:
        url = nats_url if nats_url is not None else await stack.enter_async_context(nats_url_for(settings))
        store = await open_store(settings, embedding_dim(settings))
        stack.push_async_callback(store.close)
        llm = open_llm(settings)  # one per process: its budget, breaker and concurrency limit are the process's
        if llm is not None:
            stack.push_async_callback(llm.close)
        state = Running(nats_url=url, store=store, health=Health())
        for i in range(ingestors):
            await _start(stack, state.health, open_ingestor(settings, url, store=store, llm=llm,
                                                            name=f"engram-ingestor-{i}"),
                         lambda deps: ingestor.build(settings, deps), state.ingestor_deps, state.ingestors)
        for i in range(retrievers):
            await _start(stack, state.health, open_retriever(settings, url, store=store, llm=llm,
                                                             name=f"engram-retriever-{i}"),
                         lambda deps: retriever.build(settings, deps), state.retriever_deps, state.retrievers)
        for i in range(consolidators):
            await _start(stack, state.health, open_consolidator(settings, url, store=store, llm=llm,
                                                                name=f"engram-consolidator-{i}"),
                         lambda deps: consolidator.build(settings, deps), state.consolidator_deps,
                         state.consolidators)
        state.http_port = await stack.enter_async_context(
            http.serving(settings.http_host, settings.http_port, state.health))
        yield state


async def _start(stack: contextlib.AsyncExitStack, health: Health, opening: AbstractAsyncContextManager[D],
                 build: Callable[[D], S], opened: list[D], started: list[S]) -> None:
    """Open a service's dependencies, build it and start it (each added to its list); on exit the service stops,
    then its dependencies close."""
    deps = await stack.enter_async_context(opening)
    health.check(deps.ready)
    service = build(deps)
    await service.start(health)
    stack.push_async_callback(service.stop)
    opened.append(deps)
    started.append(service)


async def serve_until_signalled(settings: Settings, *, ingestors: int, retrievers: int, consolidators: int,
                                on_ready: Callable[[Running], Awaitable[None] | None]) -> int:
    """Run services until SIGINT or SIGTERM (exit code 0), or until a part fails for good (exit code 1)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    with exporting(settings):  # spans exported by OTLP when configured, flushed on the way out
        return await _serve(settings, stop, ingestors=ingestors, retrievers=retrievers, consolidators=consolidators,
                            on_ready=on_ready)


async def _serve(settings: Settings, stop: asyncio.Event, *, ingestors: int, retrievers: int, consolidators: int,
                 on_ready: Callable[[Running], Awaitable[None] | None]) -> int:
    """The stack, until `stop` is set or a part fails for good; returns the exit code."""
    async with running(settings, ingestors=ingestors, retrievers=retrievers, consolidators=consolidators) as state:
        result = on_ready(state)
        if asyncio.iscoroutine(result):
            await result
        stopped, failed = asyncio.create_task(stop.wait()), asyncio.create_task(state.health.failed.wait())
        await asyncio.wait([stopped, failed], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        failed.cancel()
        if state.health.fatal:
            log.error("shutting down after a failure: %s", state.health.fatal)
            return 1
        log.info("shutting down")
        return 0
