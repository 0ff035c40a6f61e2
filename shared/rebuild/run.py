"""`engram rebuild`: derive the long-term memory again from the retained turns into a new build, then switch.

Recall keeps answering from the live build throughout. The steps, under a cluster-wide rebuild lease:
1. the cut: each turns stream's last sequence, then the live build's episodes (shared/rebuild/replay.py says which turns
   are re-derived: those of episodes whose turns the stream still holds up to the cut);
2. replay the streams up to the cut into windows, written into the new build with this process's compressor and
   embedder and the window size asked for;
3. carry over the live build's other entries (turns expired from the stream, windows the ingestor wrote after the
   cut, profiles), embedded again with this embedder, so the new build is one vector space;
4. consolidate each tenant in the new build (not retention, which would judge entries without their use history),
   apply the forgets answered meanwhile (every replica announces its forgets), then switch atomically;
5. carry over until nothing is left that the ingestor wrote into the old build before it saw the switch, and apply
   the forgets again.
The old build is kept for a rollback (a switch back, by hand) until the next forget deletes it.
"""
import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy
from pydantic import BaseModel, ValidationError

from engram_client import subjects
from engram_client.contract import ConsolidateRequest, ConsolidationJob, Forget, RebuildReport, RebuildRequest, Turn
from engram_client.errors import InvalidRequest
from shared.compress import Window
from shared.compress.choose import compression
from shared.compress.workers import TextWorkers
from shared.embedding import EMBED_CHARS, Bm25Encoder, Embedder, embedding_dim, open_embedder
from shared.ingest.writer import Writer, build, save
from shared.llm import LlmClient
from shared.messaging import streams
from shared.rebuild.replay import Replay, TurnKey, read, written
from shared.settings import Settings
from shared.store import Scope, Store, StoredEntry, Vectors, builds, pages

log = logging.getLogger("engram.rebuild")
BATCH_WINDOWS = 32
SETTLE_S = 2.0      # after the switch, before looking for writes other replicas began on the old build
MAX_SWEEPS = 5      # carry-over passes after the switch, until one copies nothing
LOCK = "rebuild.lock"  # a key of the lease bucket no tenant can have (tenant ids have no dot)
JOBS: list[ConsolidationJob] = ["score", "supersede", "merge", "profile"]


class ForgetNotice(BaseModel):
    """What a consolidator announces on `_ENGRAM.<prefix>.forgotten` after answering a forget."""

    tenant: str
    request: Forget


async def announce_forget(nc: Client, prefix: str, tenant: str, request: Forget) -> None:
    """Tell a rebuild running anywhere about a forget this replica answered (core NATS: only a rebuild that is
    running listens)."""
    await nc.publish(subjects.forgotten(prefix), ForgetNotice(tenant=tenant, request=request).model_dump_json()
                     .encode())


Consolidate = Callable[[Store, str, ConsolidateRequest], Awaitable[object]]
ForgetOn = Callable[[Store, str, Forget], Awaitable[object]]
Lock = Callable[[Callable[[], Coroutine[Any, Any, RebuildReport]]], Awaitable[RebuildReport | None]]


@dataclasses.dataclass(frozen=True)
class RebuildDeps:
    """What a rebuild uses from the consolidator that runs it."""

    settings: Settings
    nc: Client
    js: JetStreamContext
    live: Store
    llm: LlmClient | None
    consolidate: Consolidate       # one tenant's jobs over a store, under the tenant's lease
    forget_on: ForgetOn            # a forget over a store (and working memory, the streams), under the lease
    lock: Lock                     # run under the cluster-wide rebuild lease; None when another holds it


async def rebuild(deps: RebuildDeps, request: RebuildRequest) -> RebuildReport:
    """Run the steps of the module doc.

    Raises:
        InvalidRequest: another rebuild runs, or the stream keeps no turns (a work queue).
        ConfigError: the build name is taken, or the server collection is not an alias.
    """
    settings = deps.settings.model_copy(update={"window_turns": request.window_turns or deps.settings.window_turns})
    prefix = settings.subject_prefix
    if await streams.legacy(deps.js, prefix) == RetentionPolicy.WORK_QUEUE:
        raise InvalidRequest(f"stream {streams.legacy_turns_stream(prefix)} is a work queue and keeps no turns to "
                             "rebuild from; see docs/operations/upgrades.md")
    report = await deps.lock(lambda: _rebuild(deps, settings, request.into))
    if report is None:
        raise InvalidRequest("another rebuild is running; wait for its report")
    return report


async def _rebuild(deps: RebuildDeps, settings: Settings, name: str) -> RebuildReport:
    started = time.perf_counter()
    forgets: list[ForgetNotice] = []

    async def heard(msg: Msg) -> None:
        try:
            forgets.append(ForgetNotice.model_validate_json(msg.data))
        except ValidationError:
            log.warning("ignoring a malformed forget notice")

    listening = await deps.nc.subscribe(subjects.forgotten(settings.subject_prefix), cb=heard)
    old = await builds.current(settings, deps.live)
    built: Store | None = None
    embedder: Embedder | None = None
    workers: TextWorkers | None = None
    switched = False
    try:
        built = await builds.open_build(settings, name, embedding_dim(settings))
        embedder = open_embedder(settings)
        workers = TextWorkers(settings.text_workers, settings.window_text_budget_s, settings.context_turn_chars,
                              settings.bm25_language)
        compressor, facts = compression(settings, deps.llm, workers)
        writer = Writer(compressor, embedder, Bm25Encoder(settings.bm25_language), built, facts=facts)
        cut = {stream: (await deps.js.stream_info(stream.name)).state.last_seq
               for stream in await streams.every_turns_stream(deps.js, deps.nc, settings.subject_prefix)}
        held = await written(old)
        retained: set[TurnKey] = set()
        async for batch in read(deps.js, cut):
            retained.update((m.tenant, m.body.conversation_id, m.body.turn_id) for m in batch
                            if isinstance(m.body, Turn))
        replay = Replay(window_turns=settings.window_turns, idle_timeout_s=settings.idle_timeout_s,
                        wanted=held.replayable(retained))
        del held, retained
        windows = entries = 0
        tenants: set[str] = set()
        async for batch in read(deps.js, cut):
            closed = [w for m in batch for w in replay.apply(m)]
            written_now = await _write_all(writer, closed)
            windows, entries = windows + written_now[0], entries + written_now[1]
            tenants.update(w.tenant_id for w in closed)
        closed = replay.rest()
        written_now = await _write_all(writer, closed)
        windows, entries = windows + written_now[0], entries + written_now[1]
        tenants.update(w.tenant_id for w in closed)
        log.info("rebuild %s: %d turns replayed into %d windows (%d entries)", name, replay.turns_replayed,
                 windows, entries)
        carried = await _carry_over(old, built, replay.covered, writer, tenants)
        for tenant in sorted(tenants):
            await deps.consolidate(built, tenant, ConsolidateRequest(jobs=JOBS))
        await _forget_all(deps, built, forgets)
        replaced = await builds.switch(settings, deps.live, name, built)
        switched = True
        log.info("rebuild %s is live (it replaced %s)", name, replaced)
        await _forget_all(deps, deps.live, forgets)
        for _ in range(MAX_SWEEPS):
            await asyncio.sleep(SETTLE_S)
            more = await _carry_over(old, deps.live, replay.covered, writer, tenants)
            carried += more
            if not more:
                break
        applied = await _forget_all(deps, deps.live, forgets)
        await builds.retire(settings, deps.live)
        return RebuildReport(into=name, replaced=replaced, window_turns=settings.window_turns,
                             turns_replayed=replay.turns_replayed, turns_left_to_live=replay.turns_left,
                             unreadable=replay.unreadable, windows=windows, entries_written=entries,
                             entries_carried=carried, forgets_applied_again=applied,
                             seconds=round(time.perf_counter() - started, 3))
    except BaseException:
        if not switched and built is not None:  # the live build is untouched; the half-made one goes
            log.exception("rebuild %s failed before its switch; the live build is unchanged", name)
            await builds.discard(settings, name, built)
        raise
    finally:
        await listening.unsubscribe()
        if workers is not None:
            await asyncio.to_thread(workers.close)
        if embedder is not None:
            await embedder.close()
        if settings.qdrant_url:  # connections of their own; the live store reaches the new build through the alias
            await old.close()
            if switched and built is not None:
                await built.close()


async def _forget_all(deps: RebuildDeps, store: Store, forgets: list[ForgetNotice]) -> int:
    """Apply every forget heard so far to `store` (forget is idempotent); how many."""
    heard = list(forgets)
    for notice in heard:
        await deps.forget_on(store, notice.tenant, notice.request)
    return len(heard)


async def _write_all(writer: Writer, windows: list[Window]) -> tuple[int, int]:
    count = entries = 0
    for start in range(0, len(windows), BATCH_WINDOWS):
        done = await _write(writer, windows[start:start + BATCH_WINDOWS])
        count, entries = count + done[0], entries + done[1]
    return count, entries


async def _write(writer: Writer, windows: list[Window]) -> tuple[int, int]:
    built = await build(writer, windows)
    await save(writer, built)
    return len(windows), len(built.items)


async def _carry_over(old: Store, new: Store, covered: set[TurnKey], writer: Writer, tenants: set[str]) -> int:
    """Copy the old build's entries none of whose turns the new build re-derived (and that it does not hold yet),
    embedded again with the new build's embedder; every read and write is scoped to one tenant."""
    carried = 0
    for tenant in await old.tenants():
        scope = Scope(tenant_id=tenant)
        async for page in pages(old, scope):
            wanted = [e for e in page.entries
                      if not any((tenant, e.conversation_id, t) in covered for t in e.source_turn_ids)]
            if not wanted:
                continue
            present = {e.id for e in await new.get(scope, [e.id for e in wanted])}
            copies = [e for e in wanted if e.id not in present]
            if not copies:
                continue
            texts = [e.text for e in copies]
            dense = await writer.embedder.passages([t[:EMBED_CHARS] for t in texts])
            await new.upsert([StoredEntry(entry=e, vectors=Vectors(dense=d, sparse=writer.sparse.document(e.text)))
                              for e, d in zip(copies, dense, strict=True)])
            carried += len(copies)
            tenants.add(tenant)
    return carried
