"""Replies that fit in one NATS message, whatever the stored texts: a recall drops its entries picked last (by
budget, in the order they were picked; else the lowest-ranked), then its oldest recent turns, then shortens its
first entry, until it fits; a page of entries ends earlier, and its cursor
points at the first entry it left out, so nothing is lost."""
from collections.abc import Callable
from datetime import datetime

from pydantic import BaseModel

from engram_client.contract import EntriesResponse, EntryView, RecallResponse, Turn
from engram_client.errors import EngramError, InvalidRequest
from shared.retrieval.views import entry_view
from shared.store import MemoryEntry, ScoredEntry

REPLY_HEADROOM_BYTES = 8192  # what NATS headers and the reply's own framing may add


def size(reply: BaseModel) -> int:
    """Bytes of a reply as JSON on the wire."""
    return len(reply.model_dump_json(exclude_none=True).encode())


def _strings(*values: object) -> int:
    """Characters of every string in `values` (and in the lists and dicts among them)."""
    total = 0
    for value in values:
        if isinstance(value, str):
            total += len(value)
        elif isinstance(value, list | tuple):
            total += _strings(*value)
        elif isinstance(value, dict):
            total += _strings(*value.keys(), *value.values())
    return total


def _at_most(reply: RecallResponse) -> int:
    """A cheap upper bound of `size(reply)`, from the characters of every string (JSON spends at most 6 bytes on
    one, `\\u0001`) plus room for the rest of each entry and turn. Most replies are far below max_payload, and
    this spares serializing them twice."""
    chars = len(reply.context)
    for e in reply.entries:
        x = e.explanation
        chars += _strings(e.id, e.text, e.conversation_id, e.location, e.topic, e.persons, e.entities, e.keywords,
                          e.source_turn_ids, *((x.matched_terms, x.filters, x.boosts) if x else ()))
    for t in reply.working_memory:
        chars += _strings(t.conversation_id, t.turn_id, t.speaker, t.text, t.user_id, t.agent_id, t.metadata)
    return 6 * chars + 1024 * (len(reply.entries) + len(reply.working_memory) + 1)


MIN_TEXT_CHARS = 64  # an entry is never shortened below this


def _shortened(hit: ScoredEntry, chars: int) -> ScoredEntry:
    return hit.model_copy(update={"entry": hit.entry.model_copy(update={"text": hit.entry.text[:chars] + "…"})})


def _most_that_fit(build: Callable[[int], RecallResponse], count: int,
                   max_bytes: int) -> tuple[int, RecallResponse | None]:
    """The largest n below `count` whose reply fits, and that reply (bisection: each build renders the context)."""
    low, high, best = 0, count - 1, None
    while low <= high:
        middle = (low + high) // 2
        reply = build(middle)
        if size(reply) <= max_bytes:
            low, best = middle + 1, (middle, reply)
        else:
            high = middle - 1
    return best if best is not None else (0, None)


def fit_recall(build: Callable[[list[ScoredEntry], list[Turn]], RecallResponse], hits: list[ScoredEntry],
               recent: list[Turn], max_bytes: int | None, picked: list[str] | None = None) -> RecallResponse:
    """`build(hits, recent)`, with fewer hits, then fewer recent turns (oldest first), then a shorter first hit,
    until the reply fits `max_bytes`. The hits kept are the first of `picked` (their ids in the order a budget
    picked them: respond.picking_order), or of `hits` (rank order), and are built in rank order either way.

    Raises:
        EngramError: not even the first entry, shortened to MIN_TEXT_CHARS, fits (only a tiny max_payload or an
            entry with thousands of source turns can do that).
    """
    reply = build(hits, recent)
    if max_bytes is None or _at_most(reply) <= max_bytes or size(reply) <= max_bytes:
        return reply
    ids = {h.entry.id for h in hits}
    order = list(dict.fromkeys([*(i for i in picked or [] if i in ids), *(h.entry.id for h in hits)]))

    def first(n: int) -> list[ScoredEntry]:
        kept = set(order[:n])
        return [h for h in hits if h.entry.id in kept]

    if len(hits) > 1:
        kept, fitted = _most_that_fit(lambda n: build(first(n), recent), len(hits), max_bytes)
        if fitted is not None and kept > 0:
            return fitted
        hits = first(1)
    if recent:
        kept, fitted = _most_that_fit(lambda n: build(hits, recent[len(recent) - n:]), len(recent) + 1, max_bytes)
        if fitted is not None:
            return fitted
        recent = []
    chars = len(hits[0].entry.text) if hits else 0
    while chars > MIN_TEXT_CHARS:
        chars = max(MIN_TEXT_CHARS, chars // 2)
        reply = build([_shortened(hits[0], chars)], [])
        if size(reply) <= max_bytes:
            return reply
    raise EngramError(f"a recall reply cannot fit one NATS message of {max_bytes:,} bytes: even its first entry, "
                      f"shortened, takes {size(reply):,}")


def fit_page(entries: list[EntryView], next_cursor: str | None, max_bytes: int | None) -> EntriesResponse:
    """A page of a listing that fits: entries left out come first on the next page (the cursor is their id)."""
    page = EntriesResponse(entries=entries, next_cursor=next_cursor)
    while max_bytes is not None and len(page.entries) > 1 and size(page) > max_bytes:
        keep = len(page.entries) // 2
        page = EntriesResponse(entries=page.entries[:keep], next_cursor=page.entries[keep].id)
    return page


Cursor = tuple[datetime, str | None] | None  # a newest-first listing's next page: an instant, and an id in it


def fit_newest(entries: list[MemoryEntry], cursor: Cursor, max_bytes: int | None) -> EntriesResponse:
    """A newest-first page (entries of one instant in id order) that fits: it ends earlier when it must, and the
    cursor then points at the first entry it left out (its instant and id)."""
    ordered = sorted(sorted(entries, key=lambda e: e.id), key=lambda e: e.occurred_at, reverse=True)

    def reply(views: list[EntryView], at: Cursor) -> EntriesResponse:
        return EntriesResponse(entries=views, next_cursor=at[0].isoformat() if at else None,
                               next_cursor_id=at[1] if at else None)

    page = reply([entry_view(e) for e in ordered], cursor)
    while max_bytes is not None and len(page.entries) > 1 and size(page) > max_bytes:
        keep = len(page.entries) // 2
        first_out = page.entries[keep]
        page = reply(page.entries[:keep], (first_out.occurred_at, first_out.id))
    return page


def fit_all(entries: list[EntryView], max_bytes: int | None) -> EntriesResponse:
    """Entries asked for by id, all of them, or a clear error saying to ask for fewer."""
    reply = EntriesResponse(entries=entries)
    if max_bytes is not None and size(reply) > max_bytes:
        raise InvalidRequest(f"the {len(entries)} entries asked for take {size(reply):,} bytes, over the reply limit "
                             f"of {max_bytes:,}; ask for fewer ids at a time")
    return reply
