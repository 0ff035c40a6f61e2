"""One page of an export: the scope's entries in id order, the turns its conversations still hold in working memory
(not yet in any entry), and for one user, their own turns of the entries other people also spoke in (spoken.py);
each page within one NATS message."""
import re
import uuid
from collections.abc import Sequence
from importlib import metadata
from typing import Protocol

from nats.js import JetStreamContext
from pydantic import BaseModel

from engram_client.contract import ExportedTurn, ExportPage, ExportRequest, Turn, check_tenant
from engram_client.errors import EngramError, InvalidRequest
from shared.store import Scope, Store
from shared.transfer import spoken
from shared.transfer.entries import exported_entry
from shared.working_memory import WorkingMemory

PAGE_FRAME_BYTES = 1024  # the page's own fields around its lines
_TURN_CURSOR = re.compile(r"([0-9]{1,19}):(.+)", re.DOTALL)
_SPOKEN_CURSOR = re.compile(r"[0-9]{1,9}")


class Holdings(Protocol):
    """Where an export reads from: the store, working memory and the turns streams."""

    @property
    def store(self) -> Store:
        """The long-term store."""

    @property
    def working_memory(self) -> WorkingMemory:
        """Working memory."""

    @property
    def js(self) -> JetStreamContext:
        """JetStream, for the turns streams."""

    @property
    def prefix(self) -> str:
        """The subject prefix."""


def _version() -> str:
    try:
        return metadata.version("engram-server")
    except metadata.PackageNotFoundError:
        return "unknown"


def _fitting(lines: Sequence[BaseModel], max_bytes: int | None) -> int:
    """How many of the lines, from the first, fit a page of `max_bytes`.

    Raises:
        EngramError: not even the first fits (only a tiny max_payload or a giant entry can do that).
    """
    if max_bytes is None:
        return len(lines)
    used = PAGE_FRAME_BYTES
    for i, line in enumerate(lines):
        used += len(line.model_dump_json().encode()) + 1
        if used > max_bytes:
            if i == 0:
                raise EngramError(f"{type(line).__name__} {getattr(line, 'id', '')} takes {used:,} bytes, over the "
                                  f"reply limit of {max_bytes:,}: raise the NATS server's max_payload to export it")
            return i
    return len(lines)


async def _entries(store: Store, tenant: str, request: ExportRequest, max_bytes: int | None,
                   embedder: str | None) -> ExportPage:
    cursor = request.cursor
    if cursor is not None:
        try:
            cursor = str(uuid.UUID(cursor))
        except ValueError:
            raise InvalidRequest(f"cursor {cursor[:80]!r} is not an entry id: pass the next_cursor of the previous "
                                 "entries page") from None
    scope = Scope(tenant_id=tenant, user_id=request.user_id)
    # Every kind, superseded and merged too, with the dense vectors as stored (when the embedder is named).
    page = await store.scroll(scope, limit=request.limit, offset=cursor, with_vectors=embedder is not None)
    vectors: list[list[float] | None] = list(page.dense) if page.dense is not None else [None] * len(page.entries)
    found = list(zip(page.entries, vectors, strict=True))
    if request.user_id is not None:  # the user's alone: the others are in the `spoken` part as the user's turns
        alone = await spoken.alone(store, tenant, request.user_id, [e for e, _ in found])
        found = [pair for pair, mine in zip(found, alone, strict=True) if mine]
    lines = [exported_entry(e, dense, embedder) for e, dense in found]
    kept = _fitting(lines, max_bytes)
    return ExportPage(part="entries", entries=lines[:kept], total=await store.count(scope), engram_version=_version(),
                      next_cursor=lines[kept].id if kept < len(lines) else page.next_offset)


def _turn_cursor(cursor: str | None) -> tuple[int, str | None]:
    """(first sequence, conversation id) a turns page starts at: `<seq>:<conversation id>`."""
    if cursor is None:
        return 0, None
    found = _TURN_CURSOR.fullmatch(cursor)
    if found is None:
        raise InvalidRequest(f"cursor {cursor[:80]!r} is not a turns cursor: pass the next_cursor of the previous "
                             "turns page")
    return int(found.group(1)), found.group(2)


def _line(turn: Turn) -> ExportedTurn:
    return ExportedTurn.model_validate({**turn.model_dump(), "tenant_id": None, "type": "turn"})


async def _spoken(places: Holdings, tenant: str, request: ExportRequest, max_bytes: int | None) -> ExportPage:
    """A page of a user's own turns of the entries other people also spoke in; the cursor is how many were given.
    Every page reads the stream again: a user's turns of shared entries are seldom more than a page."""
    if request.cursor is not None and not _SPOKEN_CURSOR.fullmatch(request.cursor):
        raise InvalidRequest(f"cursor {request.cursor[:80]!r} is not a spoken cursor: pass the next_cursor of the "
                             "previous spoken page")
    first = int(request.cursor or 0)
    if request.user_id is None:  # a tenant's export holds every entry whole
        return ExportPage(part="spoken", engram_version=_version())
    shared = await spoken.withheld(places.store, tenant, request.user_id)
    turns = await spoken.own_turns(places.js, places.prefix, tenant, request.user_id, shared)
    lines = [_line(t) for t in turns[first:first + request.limit]]
    kept = _fitting(lines, max_bytes)
    done = first + kept
    return ExportPage(part="spoken", turns=lines[:kept], total=len(shared), engram_version=_version(),
                      next_cursor=str(done) if done < len(turns) else None)


async def _turns(wm: WorkingMemory, tenant: str, request: ExportRequest, max_bytes: int | None) -> ExportPage:
    first_seq, first_conversation = _turn_cursor(request.cursor)
    lines: list[ExportedTurn] = []
    used = PAGE_FRAME_BYTES

    def page(next_cursor: str | None) -> ExportPage:
        return ExportPage(part="turns", turns=lines, next_cursor=next_cursor, engram_version=_version())

    for conversation_id in sorted(c for _, c in await wm.conversations(tenant)):
        if first_conversation is not None and conversation_id < first_conversation:
            continue
        buffer = await wm.get(tenant, conversation_id)
        if buffer is None:
            continue
        # The turns of its open and sealed windows; the recent ones and a window's context are in entries already.
        seqs = sorted({*buffer.open, *(s for w in buffer.sealed for s in w.seqs)})
        if conversation_id == first_conversation:
            seqs = [s for s in seqs if s >= first_seq]
        held = await wm.turns(tenant, conversation_id, seqs)
        for seq in seqs:
            turn = held.get(seq)
            if turn is None or (request.user_id is not None and turn.user_id != request.user_id):
                continue
            line = _line(turn)
            cost = len(line.model_dump_json().encode()) + 1
            if len(lines) == request.limit or (max_bytes is not None and lines and used + cost > max_bytes):
                return page(f"{seq}:{conversation_id}")
            lines.append(line)
            used += cost
    return page(None)


async def export_page(places: Holdings, tenant: str, request: ExportRequest,
                      max_reply_bytes: int | None = None, embedder: str | None = None) -> ExportPage:
    """Answer an ExportRequest inside the tenant (and the user it names): a page of its entries, every kind and every
    state (superseded, merged away; for one user, those that hold their words alone), of the turns its working memory
    holds that no entry holds yet, or (one user) of the user's own turns of the entries other people also spoke in.

    Entries carry their dense vectors when `embedder` names the model that made them.

    Raises:
        InvalidRequest: a cursor that is not one a page of the same part gave.
    """
    check_tenant(request, tenant)
    if request.part == "entries":
        return await _entries(places.store, tenant, request, max_reply_bytes, embedder)
    if request.part == "spoken":
        return await _spoken(places, tenant, request, max_reply_bytes)
    return await _turns(places.working_memory, tenant, request, max_reply_bytes)
