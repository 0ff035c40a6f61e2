"""Replies that fit in one NATS message, whatever the stored texts: a recall drops its lowest-ranked entries (then
its oldest recent turns, then shortens its best entry) until it fits; a page of entries ends earlier, and its cursor
points at the first entry it left out, so nothing is lost."""
from collections.abc import Callable

from pydantic import BaseModel

from shared.contract import EntriesResponse, EntryView, RecallResponse, Turn
from shared.errors import InvalidRequest
from shared.store import ScoredEntry

REPLY_HEADROOM_BYTES = 8192  # what NATS headers and the reply's own framing may add


def size(reply: BaseModel) -> int:
    """Bytes of a reply as JSON on the wire."""
    return len(reply.model_dump_json(exclude_none=True).encode())


def _shortened(hit: ScoredEntry) -> ScoredEntry:
    text = hit.entry.text
    return hit.model_copy(update={"entry": hit.entry.model_copy(update={"text": text[:len(text) // 2] + "…"})})


def fit_recall(build: Callable[[list[ScoredEntry], list[Turn]], RecallResponse], hits: list[ScoredEntry],
               recent: list[Turn], max_bytes: int | None) -> RecallResponse:
    """`build(hits, recent)`, with fewer or shorter hits and fewer recent turns until the reply fits `max_bytes`."""
    reply = build(hits, recent)
    while max_bytes is not None and size(reply) > max_bytes:
        if len(hits) > 1:
            hits = hits[:-1]
        elif recent:
            recent = recent[1:]
        elif hits and len(hits[0].entry.text) > 1:
            hits = [_shortened(hits[0])]
        else:
            break
        reply = build(hits, recent)
    return reply


def fit_page(entries: list[EntryView], next_cursor: str | None, max_bytes: int | None) -> EntriesResponse:
    """A page of a listing that fits: entries left out come first on the next page (the cursor is their id)."""
    page = EntriesResponse(entries=entries, next_cursor=next_cursor)
    while max_bytes is not None and len(page.entries) > 1 and size(page) > max_bytes:
        keep = len(page.entries) // 2
        page = EntriesResponse(entries=page.entries[:keep], next_cursor=page.entries[keep].id)
    return page


def fit_all(entries: list[EntryView], max_bytes: int | None) -> EntriesResponse:
    """Entries asked for by id, all of them, or a clear error saying to ask for fewer."""
    reply = EntriesResponse(entries=entries)
    if max_bytes is not None and size(reply) > max_bytes:
        raise InvalidRequest(f"the {len(entries)} entries asked for take {size(reply):,} bytes, over the reply limit "
                             f"of {max_bytes:,}; ask for fewer ids at a time")
    return reply
