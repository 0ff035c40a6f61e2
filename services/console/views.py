"""What the pages show, from the contract's replies: a person's memory along time (the current state apart from the
history, and what superseded, merged or outdated what), an entry's fields, and recall's reasons. Plain functions;
the templates only lay them out."""
from collections import Counter
from dataclasses import dataclass, field
from datetime import date

from engram_client.contract import EntryView, Explanation

KINDS = ("profile", "fact", "episodic")
HISTORY_PAGE = 200  # entries per page of the timeline


@dataclass(frozen=True)
class Item:
    """An entry in a timeline, with what became of it."""

    entry: EntryView
    state: str                     # current, superseded, merged or outdated (a fact newer evidence may outdate)
    by: EntryView | None = None    # what superseded, absorbed or may outdate it (when the page holds it)
    by_id: str | None = None

    @property
    def current(self) -> bool:
        """Still part of the current state (an outdated fact is, with a warning)."""
        return self.state in ("current", "outdated")


def item(entry: EntryView, known: dict[str, EntryView]) -> Item:
    """The entry with what replaced it, looked up among `known`."""
    for state, by_id in (("superseded", entry.superseded_by), ("merged", entry.merged_into),
                         ("outdated", entry.outdated_by)):
        if by_id:
            return Item(entry, state, known.get(by_id), by_id)
    return Item(entry, "current")


@dataclass(frozen=True)
class Day:
    """The entries of one day, newest first."""

    day: date
    items: list[Item]


@dataclass(frozen=True)
class Timeline:
    """A user's (or a conversation's) memory: the current profile and facts, then everything along time."""

    profile: list[Item]
    facts: list[Item]
    days: list[Day]
    counts: dict[str, int]
    replaced: int                  # entries superseded or merged away (kept: memory changes are soft)
    page: int
    pages: int
    conversations: list[str] = field(default_factory=list)
    truncated: bool = False


def timeline(entries: list[EntryView], page: int = 1, truncated: bool = False) -> Timeline:
    """The timeline of these entries; `page` (from 1) of the history, HISTORY_PAGE entries each."""
    known = {e.id: e for e in entries}
    items = [item(e, known) for e in entries]
    newest_first = sorted(items, key=lambda i: (i.entry.occurred_at, i.entry.created_at), reverse=True)
    pages = max(1, -(-len(newest_first) // HISTORY_PAGE))
    page = min(max(1, page), pages)
    shown = newest_first[(page - 1) * HISTORY_PAGE: page * HISTORY_PAGE]
    days: list[Day] = []
    for i in shown:
        day = i.entry.occurred_at.date()
        if days and days[-1].day == day:
            days[-1].items.append(i)
        else:
            days.append(Day(day, [i]))
    current = [i for i in newest_first if i.current]
    return Timeline(
        profile=[i for i in current if i.entry.kind == "profile"],
        facts=[i for i in current if i.entry.kind == "fact"],
        days=days, counts={k: n for k, n in Counter(e.kind for e in entries).most_common()},
        replaced=sum(1 for i in items if i.state in ("superseded", "merged")), page=page, pages=pages,
        conversations=sorted({e.conversation_id for e in entries}), truncated=truncated)


def fields(entry: EntryView) -> list[tuple[str, str]]:
    """The entry's stored fields worth showing, as label and text (lists joined), empty ones left out."""
    rows: list[tuple[str, str]] = []
    for name, value in entry.model_dump(exclude={"text"}).items():
        if value in (None, [], "", False):
            continue
        text = ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
        text = text.replace("\x1f", " · ")  # a slot key's separator
        rows.append((name.replace("_", " "), text))
    return rows


@dataclass(frozen=True)
class Reasons:
    """An entry's recall explanation, laid out."""

    dense: str
    sparse: str
    fused: str
    terms: list[str]
    filters: list[str]
    boosts: list[str]
    ordering: list[str]


def reasons(x: Explanation | None) -> Reasons | None:
    """What recall said about one entry (None when it was not asked to explain)."""
    if x is None:
        return None

    def rank(r: int | None, score: float | None) -> str:
        return "not found" if r is None else f"#{r}" + (f" ({score:.3f})" if score is not None else "")

    return Reasons(dense=rank(x.dense_rank, x.dense_score), sparse=rank(x.sparse_rank, x.sparse_score),
                   fused=f"{x.fused_score:.4f}", terms=list(x.matched_terms), filters=list(x.filters),
                   boosts=list(x.boosts), ordering=list(x.ordering))


@dataclass(frozen=True)
class Preview:
    """What a forget will erase, named before it is confirmed."""

    what: str                       # "user", "conversation" or "entries"
    target: str                     # the user or conversation id, or the number of entries
    counts: dict[str, int]          # entries by kind
    conversations: list[str]
    entries: list[EntryView]        # the entries named (for `entries`), or the first few


def preview(what: str, target: str, entries: list[EntryView]) -> Preview:
    """The confirmation's content for erasing `target` (a user, a conversation or the given entries)."""
    return Preview(what=what, target=target, counts=dict(Counter(e.kind for e in entries).most_common()),
                   conversations=sorted({e.conversation_id for e in entries}),
                   entries=sorted(entries, key=lambda e: e.occurred_at, reverse=True)[:20])
