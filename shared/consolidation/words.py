"""A user's words in entries other people own, found and taken out when the user is forgotten.

An episode belongs to its window's first speaker, but holds every speaker's words, and the turn before it when the
window opens with a short reply; a fact belongs to whoever stated it, who may state it about someone else. So
forgetting a user (forget.py deletes what is filed under them) also goes through every entry of the tenant, of
every kind, superseded and merged-away ones included, and finds those that:

- hold the user's words: the user is among the entry's speakers (`speaker_ids`, written with every entry), or one
  of its source turns is the user's (entries written before speakers were recorded), or its text holds a sentence
  the user said (`Traces.pieces`, from the user's turns still in the stream, working memory or the dead letters);
- are about the user: a fact whose subject is a name the user spoke under.

An episode that holds the user's words is written again from its other source turns, as the ingestor would write
it (the deployment's compressor and embedders, rewrite.py), under the same id, so its links (merges, outdated
marks, use counts) stay; when those turns are no longer in the stream, or nothing is left, it is deleted. Every
other entry that holds the user's words or is about them is deleted. The check after a forget finds none of these
left, except entries this forget has written again from other people's turns only (their text may repeat a
sentence the user also said; it is someone else's now).
"""
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from nats.js import JetStreamContext
from pydantic import ValidationError

from engram_client import subjects
from engram_client.contract import Turn
from shared.compress import Window
from shared.consolidation.merge import own
from shared.consolidation.rewrite import Rederive
from shared.messaging import streams
from shared.store import MemoryEntry, Store, StoredEntry
from shared.text import patterns, scripts

MIN_PIECE_CHARS = 24      # a sentence shorter than this is too common to tell whose it is
MIN_PIECE_HAN = 8         # ... or, in Chinese, fewer Han characters than this
_SENTENCE_END = patterns.compile(r"[.!?;。！？；\n]+")
_SPACE = patterns.compile(r"\s+")


def _normal(text: str) -> str:
    return _SPACE.sub(" ", text).casefold()


def pieces_of(text: str) -> set[str]:
    """The sentences of a text long enough to tell it apart, normalised (case and spaces) for a search."""
    out = set()
    for sentence in _SENTENCE_END.split(_normal(text)):
        piece = sentence.strip()
        if len(piece) >= MIN_PIECE_CHARS or sum(scripts.is_han(c) for c in piece) >= MIN_PIECE_HAN:
            out.add(piece)
    return out


@dataclass
class Traces:
    """What a forget knows of a user's words: the names they spoke under, their turns, sentences of their text."""

    user_id: str
    names: set[str] = field(default_factory=set)            # case-folded
    turns: set[tuple[str, str]] = field(default_factory=set)  # (conversation id, turn id)
    pieces: set[str] = field(default_factory=set)

    def add_turn(self, turn: Turn) -> None:
        """Learn from one of the user's turns: every turn filed under them is theirs to take out; the name and
        sentences of a turn they spoke themselves (not an assistant's or the system's, which products often file
        under the user they answer, and whose stock phrases everyone's chats repeat) tell their words elsewhere."""
        self.turns.add((turn.conversation_id, turn.turn_id))
        if turn.role in ("user", "other"):
            self.names.add(turn.speaker.casefold())
            self.pieces |= pieces_of(turn.text)

    def add_entry(self, entry: MemoryEntry) -> None:
        """Learn the user's name from an entry that recorded it."""
        name = entry.speaker_names.get(self.user_id)
        if name:
            self.names.add(name.casefold())

    def holds(self, entry: MemoryEntry) -> bool:
        """Whether the entry holds the user's words (by its speakers, its source turns or its text)."""
        if self.user_id in entry.speaker_ids:
            return True
        if any((entry.conversation_id, t) in self.turns for t in entry.source_turn_ids):
            return True
        text = _normal(entry.text)
        return any(piece in text for piece in self.pieces)

    def about(self, entry: MemoryEntry) -> bool:
        """Whether the entry is a fact stated about the user, by a name they spoke under."""
        return entry.kind == "fact" and entry.subject is not None and entry.subject.casefold() in self.names


def _turn(data: bytes) -> Turn | None:
    try:
        return Turn.model_validate_json(data)
    except (ValidationError, ValueError):
        return None


async def turns_in(js: JetStreamContext, stream: str, subject: str,
                   wanted: Callable[[Turn], bool]) -> list[Turn]:
    """The turns on `subject` of `stream` that `wanted` picks, in stream order (messages that are not turns are
    passed over)."""
    found: list[Turn] = []

    def pick(data: bytes) -> bool:
        turn = _turn(data)
        if turn is not None and wanted(turn):
            found.append(turn)
        return False  # nothing is selected: the scan only reads

    await streams.matching(js, stream, subject, pick)
    return found


async def learn(traces: Traces, js: JetStreamContext, prefix: str, tenant: str, stream: str | None,
                held: Iterable[Turn]) -> None:
    """Add what the stream, the dead letters and working memory (`held`) hold of the user's turns."""
    mine: Callable[[Turn], bool] = lambda turn: turn.user_id == traces.user_id  # noqa: E731
    found = [] if stream is None else await turns_in(js, stream, subjects.turns(prefix, tenant), mine)
    found += await turns_in(js, streams.dlq_stream(prefix), subjects.dlq(prefix, tenant), mine)
    for turn in [*found, *held]:
        if mine(turn):
            traces.add_turn(turn)


@dataclass(frozen=True)
class Outcome:
    """What taking a user's words out of other people's entries did."""

    deleted: list[str]
    rewritten: list[str]


async def take_out(store: Store, js: JetStreamContext, prefix: str, tenant: str, stream: str | None,
                   traces: Traces, entries: list[MemoryEntry], rederive: Rederive | None,
                   cleared: set[str]) -> Outcome:
    """Write again (episodes) or mark for deletion every entry of `entries` that holds the user's words or is about
    them; `cleared` (the ids this forget already wrote again) grows with the ones written now.

    The caller deletes `Outcome.deleted` (announcing them) and mends the merges of both lists.
    """
    doomed = [e for e in entries if traces.about(e) or (e.id not in cleared and traces.holds(e))]
    episodes = [e for e in doomed if e.kind == "episodic" and not traces.about(e)]
    deleted = [e.id for e in doomed if e not in episodes]
    wanted = {(e.conversation_id, t) for e in episodes for t in own(e)["source_turn_ids"]}
    sources: dict[tuple[str, str], Turn] = {}
    if rederive is not None and stream is not None and wanted:
        for turn in await turns_in(js, stream, subjects.turns(prefix, tenant),
                                   lambda turn: (turn.conversation_id, turn.turn_id) in wanted):
            sources.setdefault((turn.conversation_id, turn.turn_id), turn)
    rewritten: list[str] = []
    now = datetime.now(UTC)
    for entry in episodes:
        written = await _rewrite(store, entry, traces, sources, rederive, now) if rederive is not None else None
        if written is None:
            deleted.append(entry.id)
        else:
            rewritten.append(entry.id)
            cleared.add(entry.id)
    return Outcome(deleted=deleted, rewritten=rewritten)


async def _rewrite(store: Store, entry: MemoryEntry, traces: Traces, sources: dict[tuple[str, str], Turn],
                   rederive: Rederive, now: datetime) -> MemoryEntry | None:
    """The episode written again from its source turns that are not the user's; None when a source turn is no longer
    in the stream, or none is left."""
    others = [t for t in own(entry)["source_turn_ids"] if (entry.conversation_id, t) not in traces.turns]
    found = [sources.get((entry.conversation_id, t)) for t in others]
    if None in found:
        return None  # a source turn is no longer in the stream: nothing to write it again from
    kept = sorted((t for t in found if t is not None and t.user_id != traces.user_id), key=lambda t: t.ts)
    if not kept:
        return None
    episode = await rederive.episode(Window(tenant_id=entry.tenant_id, conversation_id=entry.conversation_id,
                                            turns=kept))
    if episode is None:
        return None
    draft = episode.draft
    lists = {"source_turn_ids": [t.turn_id for t in kept], "persons": draft.persons,
             "entities": draft.entities, "keywords": draft.keywords}
    names = {t.user_id: t.speaker for t in kept if t.user_id is not None}
    update: dict[str, object] = {
        "text": draft.text, "location": draft.location, "topic": draft.topic, "updated_at": now,
        "speaker_ids": sorted(names), "speaker_names": names, "turn_times": [t.ts for t in kept],
        "turn_roles": [t.role for t in kept], "turn_lines": draft.turn_lines}
    if entry.unmerged is not None:  # a keeper: its own lists change; the unions are rebuilt from them (merge.py)
        update["unmerged"] = {**entry.unmerged, **lists}
    else:
        update.update(lists)
    written = entry.model_copy(update=update)
    await store.replace([StoredEntry(entry=written, vectors=episode.vectors)])
    return written
