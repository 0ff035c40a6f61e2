"""Excerpts: an episode cut to the turns a question is about, so that a token budget holds more of them.

An episode written from a window (compress/offline.py, compress/plain.py) is its day headers and each turn as
`speaker: text`, and it keeps where each turn is in its text (`MemoryEntry.turn_lines`, written by the compressor,
never read back from the text). Under a budget, an episode after the best few is cut to the turns of the speakers
the question names ("what has Melanie painted?": Melanie's turns), or, for a question in its asker's voice ("what
did I paint first?", shared/retrieval/voice.py), to the user's turns (by `MemoryEntry.turn_roles`): their lines,
whole, each under its day's header; it then holds, and reports, only those turns (`source_turn_ids`, `turn_times`,
and as `occurred_at` the first one's time when the entry kept its turns' times).

Nothing else is cut: an entry without turn lines or whose turn lines do not fit its text (written before engram kept
them, a fact, a profile, a merged keeper), one all or none of whose turns are the ones asked about, and any entry
for a question that names no speaker of the window (nor speaks in the first person) or names every one. Matching a
line by the question's words was tried and dropped: it gained nothing on the LoCoMo dev conversations and lost an
ordering question's evidence in Chinese, where a whole run of characters rarely recurs in a line.
"""
from collections.abc import Callable, Collection

from shared.compress.offline import CONTEXT_PREFIX
from shared.retrieval.plan import QueryPlan
from shared.store import MemoryEntry, ScoredEntry, TurnLines


def _turns(entry: MemoryEntry, lines: list[str]) -> list[TurnLines] | None:
    """The entry's turn lines when it may be cut: an episode of its own turns whose every turn is where its turn
    lines say (in order, apart, within the text, its first line beginning with its speaker's name)."""
    spans = entry.turn_lines
    if (entry.kind != "episodic" or entry.merged_from or entry.unmerged is not None
            or len(spans) != len(entry.source_turn_ids)):
        return None
    end = -1
    for span in spans:
        if not end < span.first <= span.last < len(lines) or not lines[span.first].startswith(f"{span.speaker}: "):
            return None
        end = span.last
    return spans


def about(entry: MemoryEntry, names: Collection[str], roles: Collection[str] = ()) -> set[int] | None:
    """Which of the entry's turns (by index) are the named speakers' (`names`: every way the question spells a
    name, QueryPlan.names), or when it names none of the entry's speakers, said in one of `roles` (a question in the
    first person: the user's, QueryPlan.roles; only when the entry kept its turns' roles); None when the entry
    cannot be cut, or when that is every turn or none."""
    spans = _turns(entry, entry.text.split("\n"))
    if spans is None:
        return None
    chosen = {i for i, span in enumerate(spans) if span.speaker in names}
    if not chosen and roles and len(entry.turn_roles) == len(spans):  # a speaker named in the entry comes first
        chosen = {i for i, role in enumerate(entry.turn_roles) if role in roles}
    return chosen if chosen and len(chosen) < len(spans) else None


def cut(entry: MemoryEntry, turns: set[int]) -> MemoryEntry:
    """The entry holding only `turns` (indices; an entry `about` chose them from): their lines, each day's header
    before the first of them that day, and their ids and times."""
    lines = entry.text.split("\n")
    spans = _turns(entry, lines)
    assert spans is not None, "cut is only asked for an entry `about` could cut"
    owner = {j: i for i, span in enumerate(spans) for j in range(span.first, span.last + 1)}
    kept: list[str] = []
    header: str | None = None  # the last day's header above, until it is written
    for j, line in enumerate(lines):
        turn = owner.get(j)
        if turn is None and not line.startswith(CONTEXT_PREFIX):
            header = line
            continue
        if (0 if turn is None else turn) in turns:  # the quoted turn before the window goes with the first turn
            if header is not None:
                kept.append(header)
                header = None
            kept.append(line)
    order = sorted(turns)
    times = [entry.turn_times[i] for i in order] if len(entry.turn_times) == len(spans) else []
    roles = [entry.turn_roles[i] for i in order] if len(entry.turn_roles) == len(spans) else []
    return entry.model_copy(update={
        "text": "\n".join(kept), "source_turn_ids": [entry.source_turn_ids[i] for i in order], "turn_times": times,
        "turn_roles": roles,
        "occurred_at": times[0] if times else entry.occurred_at,
        "turn_lines": []})  # an excerpt is not cut again


def excerpts(hits: list[ScoredEntry], plan: QueryPlan, cost: Callable[[ScoredEntry], int],
             whole: int) -> tuple[list[ScoredEntry], frozenset[str]]:
    """The hits: the best stay whole while their tokens (`cost`) add up to at most `whole` (none when the best alone
    takes more: a small budget gets more of what the question is about from excerpts than from one whole window),
    and every episode after them is cut to the turns of the speakers the question names; and the ids of those cut."""
    names, roles = frozenset(plan.names), plan.roles
    out: list[ScoredEntry] = []
    cut_ids: set[str] = set()
    used = 0
    for hit in hits:
        if used <= whole:
            used += cost(hit)
            if used <= whole:
                out.append(hit)
                continue
        turns = about(hit.entry, names, roles)
        if turns is None:
            out.append(hit)
        else:
            out.append(hit.model_copy(update={"entry": cut(hit.entry, turns)}))
            cut_ids.add(hit.entry.id)
    return out, frozenset(cut_ids)
