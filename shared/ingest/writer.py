"""Writing memory: a closed window is compressed, embedded in one batch and upserted under deterministic ids."""
import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

from engram_client.contract import Turn
from shared.compress import Compressor, Window
from shared.compress.model import Draft, FactExtractor
from shared.compress.plain import plain_episode
from shared.embedding import EMBED_CHARS, Bm25Encoder, Embedder
from shared.runtime import metrics
from shared.store import MemoryEntry, Scope, Store, StoredEntry, Vectors, entry_id
from shared.tracing import spans


@dataclass(frozen=True)
class Writer:
    """What writing needs: a compressor, both encoders, the store, and (optionally) a fact extractor."""

    compressor: Compressor
    embedder: Embedder
    sparse: Bm25Encoder
    store: Store
    facts: FactExtractor | None = None


def statement_id(window: Window, index: int) -> str:
    """The id of a window's `index`-th statement: by position, so a window compressed again (after a crash)
    overwrites its statements instead of adding a second set."""
    return entry_id(window.tenant_id, window.conversation_id, [t.turn_id for t in window.turns],
                    f"statement\x1f{index}")


def speakers(window: Window, draft: Draft) -> tuple[list[str], dict[str, str]]:
    """Whose words a draft of the window may hold, and their names: a fact with a slot, the users of its source
    turns (the rules and the model read it from those); anything else the compressor wrote, every user of the
    window and of the turns it was given as context, which it may quote."""
    sources = set(draft.source_turn_ids)
    turns = ([t for t in window.turns if t.turn_id in sources] if draft.kind == "fact" and draft.slot is not None
             else [*window.context, *window.turns])
    names = {t.user_id: t.speaker for t in turns if t.user_id is not None}
    return sorted(names), names


def _id(window: Window, draft: Draft, statements: int) -> str:
    if draft.kind == "fact" and draft.slot is None:
        return statement_id(window, statements)
    # A turn may state several facts: each slot gets its own id (and the same id when written again).
    kind = f"fact\x1f{draft.slot.attribute}" if draft.slot is not None else draft.kind
    return entry_id(window.tenant_id, window.conversation_id, draft.source_turn_ids, kind)


@dataclass(frozen=True)
class Built:
    """Entries ready to store, and the ids of statements an earlier compression of the same windows may have left
    beyond this one's count (deleted once these are stored)."""

    items: list[StoredEntry]
    stale: dict[Scope, list[str]]


def source_turns(source_turn_ids: list[str], by_turn: dict[str, Turn]) -> list[Turn]:
    """The source turns, in the same order: what each turn's time and role are kept from (none when a source is
    not among the window's turns)."""
    if not all(t in by_turn for t in source_turn_ids):
        return []
    return [by_turn[t] for t in source_turn_ids]


async def build(writer: Writer, windows: list[Window], now: datetime | None = None, plain: bool = False) -> Built:
    """Compress windows and embed every resulting entry in one batch (no store write).

    Args:
        plain: store each window as plain dated lines, without the compressor's or the fact rules' work (a window
            whose writing was cut short too often: shared/ingest/batch.py).
    """
    now = now or datetime.now(UTC)
    pending: list[MemoryEntry] = []
    stale: dict[Scope, list[str]] = {}
    room = 0 if plain else writer.compressor.statements_per_window
    for window in windows:
        first = window.turns[0]
        with metrics.ingest_stage_seconds.labels("compress").time(), spans.span("engram.compress", attributes={
                "engram.conversation_id": window.conversation_id, "engram.window.turns": len(window.turns)}):
            if plain:
                drafts = [plain_episode(window)]
            else:
                drafts = await writer.compressor.compress(window)
                if writer.facts is not None:
                    drafts += await writer.facts.extract(window)
        by_turn = {t.turn_id: t for t in window.turns}
        statements = 0
        for draft in drafts:
            slot = draft.slot
            # A fact belongs to the person whose turn states it (forgetting that user must find it).
            owner = by_turn.get(draft.source_turn_ids[0], first) if draft.kind == "fact" else first
            speaker_ids, speaker_names = speakers(window, draft)
            said = source_turns(draft.source_turn_ids, by_turn)
            pending.append(MemoryEntry(
                id=_id(window, draft, statements),
                tenant_id=window.tenant_id, user_id=owner.user_id, agent_id=owner.agent_id,
                conversation_id=window.conversation_id, kind=draft.kind, text=draft.text, keywords=draft.keywords,
                persons=draft.persons, entities=draft.entities, location=draft.location, topic=draft.topic,
                occurred_at=draft.occurred_at, created_at=now, updated_at=now,
                source_turn_ids=draft.source_turn_ids, speaker_ids=speaker_ids,
                turn_times=[t.ts for t in said], turn_roles=[t.role for t in said], turn_lines=draft.turn_lines,
                speaker_names=speaker_names,
                importance=draft.importance,
                subject=slot.subject if slot else None, attribute=slot.attribute if slot else None,
                value=slot.value if slot else None, slot_key=slot.key if slot else None))
            statements += draft.kind == "fact" and slot is None
        if statements < room:
            scope = Scope(tenant_id=window.tenant_id)
            stale.setdefault(scope, []).extend(statement_id(window, i) for i in range(statements, room))
    if not pending:
        return Built([], stale)
    texts = [e.text for e in pending]
    with metrics.ingest_stage_seconds.labels("embed").time(), spans.span("engram.embed",
                                                                         attributes={"engram.entries": len(texts)}):
        dense, sparse = await asyncio.gather(writer.embedder.passages([t[:EMBED_CHARS] for t in texts]),
                                             asyncio.to_thread(lambda: [writer.sparse.document(t) for t in texts]))
    return Built([StoredEntry(entry=e, vectors=Vectors(dense=d, sparse=s))
                  for e, d, s in zip(pending, dense, sparse, strict=True)], stale)


async def build_entries(writer: Writer, windows: list[Window], now: datetime | None = None) -> list[StoredEntry]:
    """The entries of `build`, for callers that write windows once (benchmarks, plain evaluation)."""
    return (await build(writer, windows, now)).items


async def save(writer: Writer, built: Built) -> None:
    """Upsert the entries, then delete the statements an earlier compression left beyond this one's count."""
    with metrics.ingest_stage_seconds.labels("upsert").time(), spans.span(
            "engram.upsert", attributes={"engram.entries": len(built.items)}):
        await writer.store.upsert(built.items)
        for scope, ids in built.stale.items():
            await writer.store.delete(scope, ids)


async def memorize(writer: Writer, windows: list[Window], now: datetime | None = None) -> list[MemoryEntry]:
    """Compress, embed and upsert windows; idempotent, since ids derive from tenant, conversation and turns."""
    built = await build(writer, windows, now)
    await save(writer, built)
    return [i.entry for i in built.items]
