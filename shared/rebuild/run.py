"""`engram rebuild`: derive the long-term memory again from the retained turns into a new build, then switch.

Recall keeps answering from the live build throughout. The steps:
1. note which turns wait in working memory (the running ingestor writes those into whichever build is live) and
   the stream's last sequence;
2. replay the stream up to it into windows (shared/rebuild/replay.py), written into the new build with this
   process's compressor and embedder, and the window size asked for;
3. carry over, as they are, the live build's entries none of whose turns were replayed: memories whose turns the
   stream no longer keeps (retention), and windows the ingestor wrote meanwhile;
4. consolidate each tenant in the new build (supersede, merge, profiles), then switch atomically;
5. carry over once more what the ingestor wrote into the old build before it saw the switch, and apply again every
   forget answered while the rebuild ran.
The old build is kept (a rollback is a switch back); deleting it is the operator's call.
"""
import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable

from nats.js import JetStreamContext

from shared.compress import Window
from shared.contract import Forget, RebuildReport, RebuildRequest
from shared.embedding import Bm25Encoder, embedding_dim, open_embedder
from shared.errors import InvalidRequest
from shared.ingest.working_memory import WorkingMemory
from shared.ingest.writer import Writer, build, save
from shared.llm import LlmClient
from shared.messaging import streams
from shared.rebuild.replay import Replay, read, waiting_in_working_memory
from shared.runtime.ingestor import compression
from shared.settings import Settings
from shared.store import Scope, Store, StoredEntry, Vectors, builds, pages

log = logging.getLogger("engram.rebuild")
BATCH_WINDOWS = 32
SETTLE_S = 2.0  # after the switch, for writes other replicas began on the old build to land


@dataclasses.dataclass
class Rebuilds:
    """The one rebuild a process runs at a time, and the forgets answered while it runs."""

    running: str | None = None
    forgets: list[tuple[str, Forget]] = dataclasses.field(default_factory=list)

    def forgot(self, tenant: str, request: Forget) -> None:
        """Note a forget answered now, to apply it to the new build too."""
        if self.running is not None:
            self.forgets.append((tenant, request))


Consolidate = Callable[[Store, str], Awaitable[object]]
ForgetAgain = Callable[[str, Forget], Awaitable[object]]


@dataclasses.dataclass(frozen=True)
class RebuildDeps:
    """What a rebuild uses from the consolidator that runs it."""

    settings: Settings
    js: JetStreamContext
    working_memory: WorkingMemory
    live: Store
    llm: LlmClient | None
    consolidate: Consolidate       # one tenant's jobs, over a given store
    forget_again: ForgetAgain      # a forget request, over the live store
    rebuilds: Rebuilds


async def rebuild(deps: RebuildDeps, request: RebuildRequest) -> RebuildReport:
    """Run the steps of the module doc; one at a time per process.

    Raises:
        InvalidRequest: another rebuild runs here, or the stream keeps no turns (a work queue).
        ConfigError: the build name is taken, or the server collection is not an alias.
    """
    if deps.rebuilds.running is not None:
        raise InvalidRequest(f"rebuild {deps.rebuilds.running!r} is still running here; wait for its report")
    settings = deps.settings.model_copy(update={"window_turns": request.window_turns or deps.settings.window_turns})
    prefix = settings.subject_prefix
    if not await streams.retains_turns(deps.js, prefix):
        raise InvalidRequest(f"stream {streams.turns_stream(prefix)} is a work queue and keeps no turns to rebuild "
                             "from; see the README's upgrade notes")
    deps.rebuilds.running, deps.rebuilds.forgets = request.into, []
    started = time.perf_counter()
    try:
        return await _rebuild(deps, settings, request.into, started)
    finally:
        deps.rebuilds.running = None


async def _rebuild(deps: RebuildDeps, settings: Settings, name: str, started: float) -> RebuildReport:
    dim = embedding_dim(settings)
    old = await builds.current(settings, deps.live)
    built = await builds.open_build(settings, name, dim)
    embedder = open_embedder(settings)
    switched = False
    try:
        compressor, facts = compression(settings, deps.llm)
        writer = Writer(compressor, embedder, Bm25Encoder(settings.bm25_language), built, facts=facts)
        through = (await deps.js.stream_info(streams.turns_stream(settings.subject_prefix))).state.last_seq
        replay = Replay(window_turns=settings.window_turns, idle_timeout_s=settings.idle_timeout_s,
                        excluded=await waiting_in_working_memory(deps.working_memory))
        windows = entries = 0
        tenants: set[str] = set()
        async for closed in read(replay, deps.js, settings.subject_prefix, through):
            for start in range(0, len(closed), BATCH_WINDOWS):
                written = await _write(writer, closed[start:start + BATCH_WINDOWS])
                windows, entries = windows + written[0], entries + written[1]
            tenants.update(w.tenant_id for w in closed)
        log.info("rebuild %s: %d turns replayed into %d windows (%d entries)", name, replay.turns_replayed,
                 windows, entries)
        carried = await _carry_over(old, built, replay.covered, writer.sparse, tenants)
        for tenant in sorted(tenants):
            await deps.consolidate(built, tenant)
        replaced = await builds.switch(settings, deps.live, name, built)
        switched = True
        log.info("rebuild %s is live (it replaced %s)", name, replaced)
        await asyncio.sleep(SETTLE_S)
        carried += await _carry_over(old, deps.live, replay.covered, writer.sparse, tenants)
        forgets = list(deps.rebuilds.forgets)
        for tenant, forget in forgets:
            await deps.forget_again(tenant, forget)
        await builds.retire(deps.live)
        return RebuildReport(into=name, replaced=replaced, window_turns=settings.window_turns,
                             turns_replayed=replay.turns_replayed, turns_left_to_live=replay.turns_left_to_live,
                             unreadable=replay.unreadable, windows=windows, entries_written=entries,
                             entries_carried=carried, forgets_applied_again=len(forgets),
                             seconds=round(time.perf_counter() - started, 3))
    except BaseException:
        if not switched:  # the live build is untouched; the half-made one goes, so the name can be used again
            log.exception("rebuild %s failed before its switch; the live build is unchanged", name)
            await builds.discard(settings, name, built)
        raise
    finally:
        await embedder.close()
        if settings.qdrant_url:  # connections of their own; the live store reaches the new build through the alias
            await old.close()
            if switched:
                await built.close()


async def _write(writer: Writer, windows: list[Window]) -> tuple[int, int]:
    built = await build(writer, windows)
    await save(writer, built)
    return len(windows), len(built.items)


async def _carry_over(old: Store, new: Store, covered: set[tuple[str, str, str]], sparse: Bm25Encoder,
                      tenants: set[str]) -> int:
    """Copy the old build's entries none of whose turns the new build has (nor has the entry itself)."""
    carried = 0
    for tenant in await old.tenants():
        async for page in pages(old, Scope(tenant_id=tenant), with_vectors=True):
            dense = page.dense or [[] for _ in page.entries]
            wanted = [(entry, vector) for entry, vector in zip(page.entries, dense, strict=True)
                      if not any((tenant, entry.conversation_id, t) in covered for t in entry.source_turn_ids)]
            if not wanted:
                continue
            present = {e.id for e in await new.get(Scope(tenant_id=tenant), [e.id for e, _ in wanted])}
            copies = [StoredEntry(entry=entry, vectors=Vectors(dense=vector, sparse=sparse.document(entry.text)))
                      for entry, vector in wanted if entry.id not in present]
            if copies:
                await new.upsert(copies)
                carried += len(copies)
                tenants.add(tenant)
    return carried

