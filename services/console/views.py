"""What the pages show, from the contract's replies: a person's memory along time (the current state apart from the
history, and what superseded, merged or outdated what), an entry's fields, and recall's reasons. Plain functions;
the templates only lay them out."""
from dataclasses import dataclass, field
from datetime import date

from engram_client.contract import EntryView, Explanation

KINDS = ("profile", "fact", "episodic")


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
    """A user's (or a conversation's) memory: the current profile and facts, then one page of everything along
    time, newest first."""

    profile: list[Item]
    facts: list[Item]
    days: list[Day]
    counts: dict[str, int]         # entries of each kind, and `replaced` (superseded or merged away: kept)
    older: dict[str, str] | None   # the next, older page's cursor (query parameters)
    first_page: bool
    replaced: int = 0
    conversations: list[str] = field(default_factory=list)
    truncated: bool = False        # more facts than the console reads at once


def timeline(page: list[EntryView], derived: list[EntryView], counts: dict[str, int], *,
             older: dict[str, str] | None = None,
             first_page: bool = True, conversations: list[str] | None = None, truncated: bool = False) -> Timeline:
    """The timeline of one page of entries (newest first) and of every fact and profile (`derived`): what holds now,
    and each entry with what replaced it."""
    known = {e.id: e for e in (*derived, *page)}
    days: list[Day] = []
    for i in (item(e, known) for e in sorted(page, key=lambda e: (e.occurred_at, e.created_at), reverse=True)):
        day = i.entry.occurred_at.date()
        if days and days[-1].day == day:
            days[-1].items.append(i)
        else:
            days.append(Day(day, [i]))
    current = [i for i in (item(e, known) for e in sorted(derived, key=lambda e: e.occurred_at, reverse=True))
               if i.current]
    kinds = {k: n for k, n in counts.items() if k in KINDS}
    return Timeline(profile=[i for i in current if i.entry.kind == "profile"],
                    facts=[i for i in current if i.entry.kind == "fact"], days=days, counts=kinds,
                    older=older, first_page=first_page, conversations=conversations or [], truncated=truncated,
                    replaced=counts.get("replaced", 0))


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
                   boosts=[*x.boosts, *(f"second hop: {why}" for why in x.via)], ordering=list(x.ordering))


@dataclass(frozen=True)
class Preview:
    """What a forget will erase, named before it is confirmed."""

    what: str                       # "user", "conversation" or "entries"
    target: str                     # the user or conversation id, or the number of entries
    counts: dict[str, int]          # entries by kind
    conversations: list[str]
    entries: list[EntryView]        # the newest of them, shown
    ids: list[str] = field(default_factory=list)  # `entries`: every id named (all of them go, shown or not)


def preview(what: str, target: str, counts: dict[str, int], conversations: list[str],
            entries: list[EntryView], ids: list[str] | None = None) -> Preview:
    """The confirmation's content for erasing `target` (a user, a conversation or the given entries)."""
    return Preview(what=what, target=target, counts={k: n for k, n in counts.items() if k in KINDS and n},
                   conversations=conversations,
                   entries=sorted(entries, key=lambda e: e.occurred_at, reverse=True)[:20], ids=ids or [])
