"""Restated: whether a later entry states again the thing an earlier one said, so that it is the newer evidence
whatever the gap between them (a correction a minute later, a count reported again within the hour, a date moved in
the same sitting).

It is decided without reading how either is said, from two things measured on the entries' own lines (no context
line, no speakers, no date header):

- What it shares. Of the question's terms (BM25's: the language's tokenizer, stopwords and stemmer) that the earlier
  entry holds, the later one holds at least `SHARE`, and at least `MIN_SHARED`. A window of the same chat that is merely
  near in time and about other things holds less of what made the earlier one an answer.
- A value of the kind asked. When the question asks for a figure ("how many", "多少", a measured thing: figures.py)
  the later entry states one; when it asks for a date ("when is", "哪天") it states one. For other questions (a
  name, a state) what it shares decides.

A derived claim is judged the same way, with what it is about (its words without its value) for the question and
the kind of its value for the kind asked.
"""
import math
from dataclasses import dataclass
from typing import Literal

from shared.embedding.sparse import Bm25Encoder
from shared.evidence import figures
from shared.evidence.lines import utterances
from shared.store import MemoryEntry

# Of the question's terms the earlier entry holds, the share the later one must hold too. Chosen on the within-dev
# half: asking all of them of questions that ask for no figure or date kept two more unchanged values first, and
# lost two names and states said again (0.0% / 94.3% old above / current first with one half, 2.9% / 91.4% with all).
SHARE = 0.5
MIN_SHARED = 2  # and at least this many: one term in common ("hives") is any later talk of the thing with a number

Kind = Literal["figure", "date"]


@dataclass(frozen=True)
class Subject:
    """What a question asks about, as restatements are judged: its terms, the kind of value it asks for (and the
    words that said so), and the words with digits it says itself ("p95": they name what is measured)."""

    terms: frozenset[int]
    kind: Kind | None = None
    cue: str = ""
    named: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Restatement:
    """A later entry states again what `earlier` said: it holds `shared` of the `of` terms of the question the
    earlier one holds, and a value of the kind asked, if one is."""

    earlier: str
    shared: int
    of: int
    kind: Kind | None

    def why(self) -> str:
        """The reason, as explain shows it."""
        value = f", states a {self.kind} again" if self.kind else ""
        return f"restates entry {self.earlier} (holds {self.shared} of the {self.of} question terms it held{value})"


def kind_of(value: str) -> Kind | None:
    """The kind of a derived claim's value: a figure, a date, or neither (a name, a state)."""
    if figures.dated(value):
        return "date"
    return "figure" if figures.figured(value) else None


class Reader:
    """Judges restatements, reading each entry once (its lines, terms, figures and dates; one reader per recall or
    per consolidation pass), so that judging every pair of a long chat costs a set comparison per pair."""

    def __init__(self, sparse: Bm25Encoder) -> None:
        self._sparse = sparse
        self._lines: dict[str, str] = {}
        self._terms: dict[str, frozenset[int]] = {}
        self._values: dict[tuple[str, Kind, frozenset[str]], bool] = {}

    def subject(self, query: str, figure: figures.Asked | None = None, kind: Kind | None = None) -> Subject:
        """The question `query` as restatements are judged; `figure` is how it asks for a figure (figures.asked),
        `kind` the kind of value it asks for when known otherwise (a claim's, whose words with digits name what
        is measured: "p95")."""
        terms = frozenset(self._sparse.query(query).indices)
        if figure is not None:
            return Subject(terms, "figure", figure.cue, figure.named)
        if kind is not None:
            return Subject(terms, kind, named=figures.named_in(query))
        if cue := figures.asks_date(query):
            return Subject(terms, "date", cue)
        return Subject(terms)

    def own_lines(self, entry: MemoryEntry) -> str:
        """What the entry itself says: a window's lines as said, a claim's text."""
        if entry.id not in self._lines:
            text = entry.text[:figures.MAX_READ_CHARS]
            self._lines[entry.id] = "\n".join(utterances(text)) if entry.kind == "episodic" else text
        return self._lines[entry.id]

    def terms(self, entry: MemoryEntry) -> frozenset[int]:
        """The BM25 terms of the entry's own lines."""
        if entry.id not in self._terms:
            self._terms[entry.id] = frozenset(self._sparse.document(self.own_lines(entry)).indices)
        return self._terms[entry.id]

    def carries(self, entry: MemoryEntry, kind: Kind, named: frozenset[str] = frozenset()) -> bool:
        """Whether the entry's own lines state a value of `kind` (a figure besides the words `named`, a date)."""
        key = (entry.id, kind, named)
        if key not in self._values:
            lines = self.own_lines(entry)
            self._values[key] = figures.figured(lines, named) if kind == "figure" else figures.dated(lines)
        return self._values[key]

    def restates(self, later: MemoryEntry, earlier: MemoryEntry, subject: Subject) -> Restatement | None:
        """How `later` states again what `earlier` said about the subject, or None when it does not (another
        conversation's entry never does: "within one conversation" is what this judges)."""
        if later.conversation_id != earlier.conversation_id:
            return None
        held = subject.terms & self.terms(earlier)
        again = held & self.terms(later)
        if len(again) < max(MIN_SHARED, math.ceil(SHARE * len(held))):
            return None
        if subject.kind is not None and not self.carries(later, subject.kind, subject.named):
            return None
        return Restatement(earlier.id, len(again), len(held), subject.kind)
