"""Excerpts: an episode cut to the turns a question is about, so that a token budget holds more of them.

An episode written from a window (compress/offline.py, compress/plain.py) is its day headers and one `speaker: text`
line per turn, in its turns' order. Under a budget, an episode below the first few is cut to the turns of the
speakers the question names ("what has Melanie painted?": Melanie's lines); its day headers stay, and it then
holds (and reports) only those turns. An entry whose lines cannot be matched one to one with its turns (a model's
summary, a fact, a profile, a merged keeper) is never cut, nor is one all or none of whose turns are the named
speakers', nor any entry for a question that names no speaker. Matching a line by the question's words was tried
and dropped: it gained nothing on the LoCoMo dev conversations and lost an ordering question's evidence in Chinese,
where a whole run of characters rarely recurs in a line.
"""
from collections.abc import Callable
from dataclasses import dataclass

from shared.retrieval.plan import QueryPlan
from shared.store import MemoryEntry, ScoredEntry
from shared.text import patterns

_CONTEXT_PREFIX = "(before: "
# A day's header as the compressors write it: "[Mon 8 May 2023]", "[2023年5月8日]".
_DAY = patterns.compile(r"\[(?:[^\W\d_]{2,12}\.? \d{1,2} [^\W\d_]{3,12} \d{4}|\d{4}年\d{1,2}月\d{1,2}日)\]")


@dataclass(frozen=True)
class _Line:
    text: str
    turn: int | None  # the turn it begins or continues; None for a day header or the quoted context


def _speakers(entry: MemoryEntry) -> set[str]:
    return {*entry.persons, *entry.speaker_names.values()}


def _lines(entry: MemoryEntry) -> tuple[list[_Line], list[str]] | None:
    """The entry's lines, each with its turn's index, and each turn's speaker; None unless the lines that begin a
    turn (`speaker: `) are exactly as many as its source turns."""
    speakers = _speakers(entry)
    out: list[_Line] = []
    said_by: list[str] = []
    turn: int | None = None
    texts = entry.text.split("\n")

    def starts_turn(text: str) -> bool:
        speaker, sep, _ = text.partition(": ")
        return bool(sep) and speaker in speakers

    for i, text in enumerate(texts):
        following = texts[i + 1] if i + 1 < len(texts) else ""
        if _DAY.fullmatch(text) and (starts_turn(following) or following.startswith(_CONTEXT_PREFIX)):
            out.append(_Line(text, None))  # a day's header comes before a turn (a "[laughs]" line is a turn's)
            turn = None
            continue
        if text.startswith(_CONTEXT_PREFIX) and not said_by:
            out.append(_Line(text, None))
            continue
        if starts_turn(text):
            said_by.append(text.partition(": ")[0])
            turn = len(said_by) - 1
        elif turn is None:
            return None  # a line that is neither a header nor part of a turn: not a window's lines
        out.append(_Line(text, turn))
    if len(said_by) != len(entry.source_turn_ids) or len(said_by) < 2:
        return None
    return out, said_by


def about(entry: MemoryEntry, plan: QueryPlan) -> set[int] | None:
    """Which of the entry's turns (by index) the question is about: those of the speakers it names; None when the
    entry cannot be cut, or when that is every turn or none (a question naming no speaker keeps entries whole)."""
    if entry.kind != "episodic" or entry.merged_from or entry.unmerged is not None:
        return None
    found = _lines(entry)
    if found is None:
        return None
    _, said_by = found
    names = set(plan.names)
    chosen = {i for i, speaker in enumerate(said_by) if speaker in names}
    if not chosen or len(chosen) == len(said_by):
        return None
    return chosen


def cut(entry: MemoryEntry, turns: set[int]) -> MemoryEntry:
    """The entry holding only `turns` (indices): their lines under their day headers, their ids and times."""
    found = _lines(entry)
    assert found is not None, "cut is only asked for an entry `about` could read"
    lines, _ = found
    kept: list[str] = []
    header: str | None = None
    for line in lines:
        if line.turn is None and not line.text.startswith(_CONTEXT_PREFIX):
            header = line.text  # a day's header: written before the first kept line of its day
            continue
        # the quoted context (`turn` None) belongs to the first turn
        if (0 if line.turn is None else line.turn) in turns:
            if header is not None:
                kept.append(header)
                header = None
            kept.append(line.text)
    order = sorted(turns)
    times = [entry.turn_times[i] for i in order] if len(entry.turn_times) == len(entry.source_turn_ids) else []
    ids = [entry.source_turn_ids[i] for i in order]
    return entry.model_copy(update={"text": "\n".join(kept), "source_turn_ids": ids, "turn_times": times})


def excerpts(hits: list[ScoredEntry], plan: QueryPlan, cost: Callable[[ScoredEntry], int],
             whole: int) -> tuple[list[ScoredEntry], frozenset[str]]:
    """The hits, the best of them whole while their tokens (`cost`) add up to at most `whole`, and every episode
    after them cut to the turns the question is about; and the ids of those cut."""
    out: list[ScoredEntry] = []
    cut_ids: set[str] = set()
    used = 0
    for hit in hits:
        if used <= whole:
            used += cost(hit)
            if used <= whole:
                out.append(hit)
                continue
        turns = about(hit.entry, plan)
        if turns is None:
            out.append(hit)
        else:
            out.append(hit.model_copy(update={"entry": cut(hit.entry, turns)}))
            cut_ids.add(hit.entry.id)
    return out, frozenset(cut_ids)
