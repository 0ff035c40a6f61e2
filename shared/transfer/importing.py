"""Loading an export file into a tenant, a batch of lines at a time: its entries written under their own ids
(embedded again with this deployment's embedder), its working-memory turns handed to the tenant's turns stream, and
nothing written twice: an entry the tenant holds is left as it is, a turn already in working memory or in an entry
is not sent again."""
import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from nats.js import JetStreamContext
from nats.js.errors import APIError

from engram_client import subjects
from engram_client.contract import ExportedEntry, ExportedTurn, ImportRequest, ImportResult, Turn, check_tenant
from engram_client.errors import Forbidden, InvalidRequest, Unavailable
from shared.consolidation.lease import Leases
from shared.embedding import EMBED_CHARS, Bm25Encoder, Embedder
from shared.messaging.connection import transient
from shared.store import EntryFilter, Scope, Store, StoredEntry, Vectors, pages
from shared.transfer.entries import stored_entry
from shared.working_memory import WorkingMemory
from shared.working_memory import buffer as buffers


@dataclass(frozen=True)
class Importing:
    """What an import writes with: the store, working memory (read), the turns streams and both encoders."""

    store: Store
    working_memory: WorkingMemory
    js: JetStreamContext
    prefix: str
    sparse: Bm25Encoder
    embedder: Callable[[], Embedder]
    embedder_name: str = ""  # an entry exported by an engram with this embedder keeps its dense vector
    publish_timeout_s: float = 10.0


def _what(line: ExportedEntry | ExportedTurn) -> str:
    return f"entry {line.id}" if isinstance(line, ExportedEntry) else f"turn {line.turn_id!r}"


def check_import(tenant: str, request: ImportRequest) -> None:
    """Refuse, before anything is written, a batch that is not this tenant's to import.

    Raises:
        Forbidden: the file is another tenant's and `map_tenant` is not set, or a line names another tenant than
            the file's header.
        InvalidRequest: a line of a one-user file belongs to another user, or an entry id appears twice.
    """
    check_tenant(request, tenant)
    source, user_id = request.source.tenant_id, request.source.user_id
    if source != tenant and not request.map_tenant:
        raise Forbidden(f"the file holds the memory of tenant {source!r}, not of tenant {tenant!r}; import it "
                        f"with map_tenant (engram import --map-tenant) to file it under {tenant!r}")
    lines: list[ExportedEntry | ExportedTurn] = [*request.entries, *request.turns]
    for line in lines:
        if line.tenant_id is not None and line.tenant_id != source:
            raise Forbidden(f"{_what(line)} names tenant {line.tenant_id!r}, but the file is of tenant {source!r}")
        if user_id is not None and line.user_id != user_id:
            raise InvalidRequest(f"{_what(line)} belongs to user {line.user_id!r}, but the file holds the memory of "
                                 f"user {user_id!r} only")
    ids = [e.id for e in request.entries]
    if len(set(ids)) != len(ids):
        raise InvalidRequest("an entry id appears twice in one import batch")


class _Marks:
    """Whether a person or a conversation of the tenant has a forget mark (read once each)."""

    def __init__(self, working_memory: WorkingMemory, tenant: str) -> None:
        self._marks, self._tenant = working_memory.forgotten, tenant
        self._read: dict[tuple[str, str | None], bool] = {}

    async def forgotten(self, conversation_id: str, user_ids: list[str]) -> bool:
        """Whether the conversation or one of these users was forgotten (a mark, kept a day after the forget)."""
        for user_id in [None, *user_ids]:
            key = (conversation_id, user_id)
            if key not in self._read:
                self._read[key] = await self._marks.through(self._tenant, conversation_id, user_id) > 0
            if self._read[key]:
                return True
        return False


async def _entries(importing: Importing, tenant: str, lines: list[ExportedEntry]) -> tuple[int, int, int]:
    """(written, already present, left out as forgotten) of these entries."""
    if not lines:
        return 0, 0, 0
    store, scope, ids = importing.store, Scope(tenant_id=tenant), [line.id for line in lines]
    present = {e.id for e in await store.get(scope, ids)}
    # Point ids are one space for every tenant: an id another tenant holds would be overwritten, so it is refused
    # (counted across tenants, as ids and counts only, never data).
    elsewhere = sum((await store.kind_counts(EntryFilter(ids=ids))).values()) - len(present)
    if elsewhere > 0:
        raise Forbidden(f"{elsewhere} of the {len(ids)} entry ids of this batch are another tenant's in this "
                        "deployment, and an import keeps ids: nothing of the batch was written (import the file where "
                        "that tenant does not live, or forget its memory there first)")
    lines = [line for line in lines if line.id not in present]
    # A file exported before someone was forgotten here must not bring them back.
    marks, kept_lines = _Marks(importing.working_memory, tenant), []
    for line in lines:
        entry = stored_entry(line, tenant)
        people = sorted({*entry.speaker_ids, *([entry.user_id] if entry.user_id else [])})
        if not await marks.forgotten(entry.conversation_id, people):
            kept_lines.append(line)
    forgotten, lines = len(lines) - len(kept_lines), kept_lines
    new = [stored_entry(line, tenant) for line in lines]
    if new:
        texts = [e.text for e in new]
        # A vector this engram's embedder made is written as it is; the others are made again from the text.
        kept: list[list[float] | None] = [line.dense if line.dense and line.embedder == importing.embedder_name
                                          else None for line in lines]
        again = [i for i, dense in enumerate(kept) if dense is None]
        if again:
            made = await importing.embedder().passages([texts[i][:EMBED_CHARS] for i in again])
            for i, vector in zip(again, made, strict=True):
                kept[i] = vector
        dense = [vector or [] for vector in kept]
        sparse = await asyncio.to_thread(lambda: [importing.sparse.document(t) for t in texts])
        await store.upsert([StoredEntry(entry=e, vectors=Vectors(dense=d, sparse=s))
                            for e, d, s in zip(new, dense, sparse, strict=True)])
    return len(new), len(present), forgotten


async def _in_entries(store: Store, tenant: str, conversation_id: str) -> set[str]:
    """Every turn id some entry of the conversation was made from."""
    scope = Scope(tenant_id=tenant, conversation_id=conversation_id)
    return {t async for page in pages(store, scope) for e in page.entries for t in e.source_turn_ids}


async def _turns(importing: Importing, tenant: str, lines: list[ExportedTurn]) -> tuple[int, int, int]:
    """(queued, already present, left out as forgotten) of these turns: each new one is published to the tenant's
    turns stream, so the ingestors add it to working memory as any turn (and the stream keeps it for rebuilds)."""
    queued = present = forgotten = 0
    marks = _Marks(importing.working_memory, tenant)
    by_conversation: dict[str, list[ExportedTurn]] = {}
    for line in lines:
        by_conversation.setdefault(line.conversation_id, []).append(line)
    subject = subjects.turns(importing.prefix, tenant)
    for conversation_id, turns in by_conversation.items():
        stored = await _in_entries(importing.store, tenant, conversation_id)
        buffer = await importing.working_memory.get(tenant, conversation_id)
        for line in turns:
            if await marks.forgotten(conversation_id, [line.user_id] if line.user_id else []):
                forgotten += 1
                continue
            if line.turn_id in stored or (buffer is not None and buffers.seen(buffer, line.turn_id)):
                present += 1
                continue
            turn = Turn.model_validate({**line.model_dump(exclude={"type"}), "tenant_id": None})
            try:
                with transient(f"queueing turn {turn.turn_id!r}"):
                    ack = await importing.js.publish(subject, turn.model_dump_json(exclude_none=True).encode(),
                                                     headers={"Nats-Msg-Id": turn.msg_id(tenant)},
                                                     timeout=importing.publish_timeout_s)
            except APIError as exc:  # the tenant's stream refused it: its storage quota, most likely
                raise Unavailable(f"tenant {tenant!r}'s turns stream refused turn {turn.turn_id!r}: "
                                  f"{exc.description or type(exc).__name__}") from exc
            if ack.duplicate:  # queued by an earlier import, not yet in working memory
                present += 1
            else:
                queued += 1
    return queued, present, forgotten


async def import_batch(importing: Importing, tenant: str, request: ImportRequest) -> ImportResult:
    """Import a batch of an export file's entries and turns into the tenant (the caller holds the tenant's lease).

    Raises:
        Forbidden: see check_import; or an entry id of the batch is another tenant's in this deployment.
        InvalidRequest: see check_import; or an entry's `internal` fields are not what this engram stores.
    """
    check_import(tenant, request)
    written, kept, left = await _entries(importing, tenant, list(request.entries))
    queued, held, gone = await _turns(importing, tenant, list(request.turns))
    return ImportResult(entries_written=written, entries_present=kept, turns_queued=queued, turns_present=held,
                        entries_forgotten=left, turns_forgotten=gone)


async def import_leased(importing: Importing, leases: Leases, tenant: str, request: ImportRequest, *,
                        wait_s: float) -> ImportResult:
    """Answer an ImportRequest under the tenant's consolidation lease (a consolidation or a forget never runs beside
    it), then make the tenant's next scheduled consolidation go over every owner: the imported entries keep their
    old update times, so no change since the last run would point at them.

    Raises:
        Unavailable: a consolidation of the tenant held the lease for over `wait_s`.
    """
    check_import(tenant, request)

    async def job() -> ImportResult:
        result = await import_batch(importing, tenant, request)
        if result.entries_written:
            await leases.full_next(tenant)
        return result

    result = await leases.run(tenant, job, wait_s=wait_s)
    if result is None:
        raise Unavailable(f"a consolidation of tenant {tenant!r} has held its lease for over {wait_s:g} s; import "
                          "the batch again later")
    return result
