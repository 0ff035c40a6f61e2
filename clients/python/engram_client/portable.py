"""Export files: everything engram holds about a tenant or one user written to a JSON Lines file page by page, and
such a file loaded into a tenant batch by batch, every line of it checked before anything is sent.

The file is an `ExportHeader` line, the entries, then the turns no entry of it holds (see
engram_client/contract/transfer.py). The turns are read first and written last: a turn whose window closes during
the export is then in the file as an entry, or as a turn, or both (an import adds it once), never in neither.
"""
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from pydantic import BaseModel, ValidationError

from engram_client.contract import (
    ExportedEntry,
    ExportedTurn,
    ExportHeader,
    ExportLine,
    ExportPage,
    ExportPart,
    ExportRequest,
    ImportRequest,
    ImportResult,
)
from engram_client.contract.failures import error_body
from engram_client.contract.transfer import MAX_BATCH, MAX_PAGE
from engram_client.errors import EngramError, Forbidden, InvalidRequest

if TYPE_CHECKING:
    from engram_client.client import MemoryClient

MAX_LINE_BYTES = 4 * 1024 * 1024   # a line of a file (an entry of the longest text, escaped, fits)
REQUEST_FRAME_BYTES = 8 * 1024     # an import request's header, subject and inbox around its lines
SPOOL_BYTES = 16 * 1024 * 1024     # turns kept in memory while the entries are exported; past it, a temporary file


@dataclass
class Progress:
    """How far an export or an import is (totals when known)."""

    entries: int = 0
    entries_total: int | None = None
    turns: int = 0
    turns_total: int | None = None


OnProgress = Callable[[Progress], None]


def _dump(line: BaseModel) -> str:
    return line.model_dump_json(exclude_none=True)


def _bytes(line: BaseModel) -> int:
    return len(_dump(line).encode())


async def _pages(client: "MemoryClient", part: ExportPart, user_id: str | None) -> AsyncIterator[ExportPage]:
    cursor: str | None = None
    while True:
        page = await client.export_page(ExportRequest(user_id=user_id, part=part, cursor=cursor, limit=MAX_PAGE))
        yield page
        if page.next_cursor is None:
            return
        if page.next_cursor == cursor and not (page.entries or page.turns):
            raise EngramError(f"the export of {part} does not move on from cursor {cursor!r}")
        cursor = page.next_cursor


async def export_to(client: "MemoryClient", out: TextIO, *, user_id: str | None = None,
                    on_progress: OnProgress | None = None) -> ExportHeader:
    """Write everything engram holds about the client's tenant (or one of its users) to `out` as an export file:
    the header, every entry (every kind, superseded and merged-away ones included; of a user, those that hold their
    words and nobody else's), then the turns no entry of the file holds (still in working memory, and of a user their
    own turns of the entries other people also spoke in), each once. Returns the header."""
    progress = Progress()
    exported_at = datetime.now(UTC)
    version = ""
    seen: set[tuple[str, str]] = set()

    def shown(page: ExportPage) -> None:
        if page.part == "entries":
            progress.entries += len(page.entries)
            progress.entries_total = page.total
        else:
            progress.turns += len(page.turns)
        if on_progress:
            on_progress(progress)

    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES, mode="w+", encoding="utf-8") as turns:
        async for page in _pages(client, "turns", user_id):
            version = page.engram_version
            for turn in page.turns:
                seen.add((turn.conversation_id, turn.turn_id))
                turns.write(_dump(turn) + "\n")
            shown(page)
        header = ExportHeader(type="header", tenant_id=client.tenant, user_id=user_id, exported_at=exported_at,
                              engram_version=version)
        out.write(_dump(header) + "\n")
        async for page in _pages(client, "entries", user_id):
            for entry in page.entries:
                out.write(_dump(entry) + "\n")
            shown(page)
        if user_id is not None:
            async for page in _pages(client, "spoken", user_id):
                fresh = [t for t in page.turns if (t.conversation_id, t.turn_id) not in seen]
                seen.update((t.conversation_id, t.turn_id) for t in fresh)
                for turn in fresh:
                    out.write(_dump(turn) + "\n")
                shown(page.model_copy(update={"turns": fresh}))
        turns.seek(0)
        for line in turns:
            out.write(line)
    out.flush()
    return header


def read_export(path: Path) -> Iterator[tuple[int, ExportHeader | ExportedEntry | ExportedTurn]]:
    """Every line of an export file with its number (blank lines skipped), each validated.

    Raises:
        InvalidRequest: a line longer than MAX_LINE_BYTES, or not a valid line (naming the file and the line).
    """
    with path.open("rb") as f:
        for number, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(raw) > MAX_LINE_BYTES:
                raise InvalidRequest(f"{path}:{number}: the line is longer than {MAX_LINE_BYTES:,} bytes")
            if not raw.strip():
                continue
            try:
                line = ExportLine.model_validate_json(raw).root
            except ValidationError as exc:
                raise InvalidRequest(f"{path}:{number}: not a line of an engram export: "
                                     f"{error_body(exc).message}") from None
            yield number, line


@dataclass(frozen=True)
class Checked:
    """An export file every line of which was checked: its header and how many entries and turns it holds."""

    header: ExportHeader
    entries: int
    turns: int


def _what(line: ExportedEntry | ExportedTurn) -> str:
    return f"entry {line.id}" if isinstance(line, ExportedEntry) else f"turn {line.turn_id!r}"


def check_file(path: Path, tenant: str, *, map_tenant: bool = False) -> Checked:
    """Read the whole file and refuse it, before anything is imported, unless every line is what an import takes.

    Raises:
        Forbidden: the file is another tenant's and `map_tenant` is not set, or a line names another tenant than
            the header.
        InvalidRequest: no header first, a second header, a malformed or oversized line, a line of a one-user file
            that is another user's, or an entry or a turn that appears twice.
    """
    header: ExportHeader | None = None
    entries: dict[str, int] = {}
    turns: dict[tuple[str, str], int] = {}
    for number, line in read_export(path):
        if isinstance(line, ExportHeader):
            if header is not None:
                raise InvalidRequest(f"{path}:{number}: a second header (the first is on a line before)")
            header = line
            if header.tenant_id != tenant and not map_tenant:
                raise Forbidden(f"{path} holds the memory of tenant {header.tenant_id!r}, not of tenant {tenant!r}; "
                                f"import it with --map-tenant (map_tenant=True) to file it under {tenant!r}")
            continue
        if header is None:
            raise InvalidRequest(f"{path}:{number}: an export file starts with its header line")
        if line.tenant_id is not None and line.tenant_id != header.tenant_id:
            raise Forbidden(f"{path}:{number}: {_what(line)} names tenant {line.tenant_id!r}, but the file is of "
                            f"tenant {header.tenant_id!r}; nothing was imported")
        if header.user_id is not None and line.user_id != header.user_id:
            raise InvalidRequest(f"{path}:{number}: {_what(line)} belongs to user {line.user_id!r}, but the file "
                                 f"holds the memory of user {header.user_id!r} only")
        before = entries.setdefault(line.id, number) if isinstance(line, ExportedEntry) else \
            turns.setdefault((line.conversation_id, line.turn_id), number)
        if before != number:
            raise InvalidRequest(f"{path}:{number}: {_what(line)} was on line {before} already")
    if header is None:
        raise InvalidRequest(f"{path} holds no header line: it is not an engram export")
    return Checked(header, len(entries), len(turns))


async def import_from(client: "MemoryClient", path: Path, *, map_tenant: bool = False,
                      on_progress: OnProgress | None = None) -> ImportResult:
    """Load an export file into the client's tenant: check every line first (see check_file), then send its
    entries, then its turns, in batches that each fit one NATS message. Importing the same file again changes
    nothing. Returns the sum of what every batch did."""
    checked = check_file(path, client.tenant, map_tenant=map_tenant)
    progress = Progress(entries_total=checked.entries, turns_total=checked.turns)
    budget = client.max_payload - REQUEST_FRAME_BYTES - _bytes(checked.header)
    total = ImportResult()
    for kind in (ExportedEntry, ExportedTurn):
        batch: list[ExportedEntry | ExportedTurn] = []
        used = 0
        lines = (line for _, line in read_export(path) if isinstance(line, kind))
        for line in [*lines, None]:
            cost = _bytes(line) + 1 if line is not None else 0
            if line is not None and cost > budget:
                raise InvalidRequest(f"{path}: {_what(line)} takes {cost:,} bytes, more than one request to this "
                                     f"NATS server carries ({client.max_payload:,} bytes at most)")
            if batch and (line is None or len(batch) == MAX_BATCH or used + cost > budget):
                request = ImportRequest(
                    source=checked.header, map_tenant=map_tenant,
                    entries=[b for b in batch if isinstance(b, ExportedEntry)],
                    turns=[b for b in batch if isinstance(b, ExportedTurn)])
                total = total.plus(await client.import_batch(request))
                progress.entries += len(request.entries)
                progress.turns += len(request.turns)
                if on_progress:
                    on_progress(progress)
                batch, used = [], 0
            if line is not None:
                batch.append(line)
                used += cost
    return total
