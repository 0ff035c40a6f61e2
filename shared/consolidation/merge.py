"""Merge: near-duplicate episodes of one owner become one entry that keeps every source.

Two episodes are near-duplicates when their dense vectors are close (cosine at least `threshold`) and they
share content: most of their content words (at least `min_overlap`, Jaccard), and most of their user's words when
both hold an assistant's turns too, or a source turn (of the same conversation: turn ids are only unique within
one). An assistant that answers at length in the same words every time makes two windows alike to the dense model
and in their words while the user said different things in them: those are not duplicates. Episodes are
taken oldest first (by `occurred_at`, then conversation and turns); each joins the first earlier *kept* episode
it duplicates, or is kept itself. The kept entry gets the union of its group's source turn ids, persons,
entities and keywords and lists the others in `merged_from`; the others get `merged_into` and are hidden from
recall, not deleted. So no source turn becomes unreachable from the active entries.

The groups are a pure function of the episodes' texts, turn roles and lines, and vectors (merging never changes
any of them), so running
the job again changes nothing; an entry whose group changed (its keeper was forgotten) is put right.
"""
from dataclasses import dataclass

import numpy as np

from shared.consolidation.changes import Change
from shared.store import MemoryEntry
from shared.text import patterns, scripts

_WORD = patterns.compile(r"[^\W\d_]{3,}+")
BLOCK = 512  # rows of the similarity matrix computed at once


@dataclass(frozen=True)
class Candidate:
    """An episode and its dense vector."""

    entry: MemoryEntry
    dense: list[float]


def _order(entry: MemoryEntry) -> tuple[object, ...]:
    # Oldest first; ties broken by what the entry is (conversation, turns), then by id.
    return entry.occurred_at, entry.conversation_id, sorted(entry.source_turn_ids), entry.id


def content_words(text: str) -> frozenset[str]:
    """Lower-cased words of three letters or more, and two-character pieces of Han runs."""
    words = {w.casefold() for w in _WORD.findall(text) if not scripts.is_han(w[0])}
    for run in scripts.han_runs(text):
        words.update(run[i:i + 2] for i in range(len(run) - 1))
    return frozenset(words)


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def users_words(entry: MemoryEntry) -> frozenset[str] | None:
    """The content words of the user's turns of an episode that holds other roles' turns (an assistant's), by its
    turn roles and lines: none when it holds no user turn; None when it holds only the user's, or did not keep its
    turns' roles or lines."""
    roles, spans = entry.turn_roles, entry.turn_lines
    if not roles or len(roles) != len(spans) or all(role == "user" for role in roles):
        return None
    lines = entry.text.split("\n")
    if any(not span.first <= span.last < len(lines) for span in spans):
        return None
    said = [line.removeprefix(f"{span.speaker}: ") for span, role in zip(spans, roles, strict=True) if role == "user"
            for line in lines[span.first:span.last + 1]]
    return content_words("\n".join(said))


def _alike(words: tuple[frozenset[str], frozenset[str] | None], other: tuple[frozenset[str], frozenset[str] | None],
           min_overlap: float) -> bool:
    """Whether two episodes share most of their words, and of their user's words when both hold an assistant's
    (two that hold none of the user's are alike by all their words)."""
    if _overlap(words[0], other[0]) < min_overlap:
        return False
    if words[1] is None or other[1] is None or not (words[1] or other[1]):
        return True
    return _overlap(words[1], other[1]) >= min_overlap


def groups(candidates: list[Candidate], threshold: float, min_overlap: float) -> dict[str, str]:
    """For every episode, the id of the episode it is merged into (itself when kept)."""
    ordered = sorted(candidates, key=lambda c: _order(c.entry))
    if not ordered:
        return {}
    matrix = np.asarray([c.dense for c in ordered], dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)
    words = [(content_words(c.entry.text), users_words(c.entry)) for c in ordered]
    # Turn ids are unique within a conversation only (products number turns 1, 2, 3 in every chat): a shared source
    # turn is one of the same conversation.
    sources = [{(c.entry.conversation_id, t) for t in own(c.entry)["source_turn_ids"]} for c in ordered]
    into: dict[str, str] = {}
    kept: list[int] = []
    for start in range(0, len(ordered), BLOCK):
        sims = matrix[start:start + BLOCK] @ matrix.T
        for row in range(sims.shape[0]):
            i = start + row
            target = None
            close = np.asarray(kept, dtype=np.int64)
            close = close[sims[row, close] >= threshold] if kept else close
            for k in close.tolist():  # earlier kept episodes, oldest first: the first duplicate wins
                if _alike(words[i], words[k], min_overlap) or sources[i] & sources[k]:
                    target = k
                    break
            if target is None:
                kept.append(i)
                into[ordered[i].entry.id] = ordered[i].entry.id
            else:
                into[ordered[i].entry.id] = ordered[target].entry.id
    return into


def _union(*lists: list[str]) -> list[str]:
    return list(dict.fromkeys(item for items in lists for item in items))


UNIONED = ("source_turn_ids", "persons", "entities", "keywords")


def own(entry: MemoryEntry) -> dict[str, list[str]]:
    """An entry's own lists, before any merge widened them (kept in `unmerged` the first time it keeps a group),
    so that every run rebuilds the unions from the members' own values and never from an earlier run's."""
    if entry.unmerged is not None:
        return {name: list(entry.unmerged.get(name, [])) for name in UNIONED}
    return {name: list(getattr(entry, name)) for name in UNIONED}


def changes(candidates: list[Candidate], threshold: float, min_overlap: float) -> list[Change]:
    """The payload updates that bring these episodes to their merged state (none when they already are)."""
    into = groups(candidates, threshold, min_overlap)
    by_id = {c.entry.id: c.entry for c in candidates}
    members: dict[str, list[MemoryEntry]] = {}
    for entry_id, keeper in into.items():
        if entry_id != keeper:
            members.setdefault(keeper, []).append(by_id[entry_id])
    out = []
    for entry_id, keeper in sorted(into.items()):
        entry = by_id[entry_id]
        if entry_id != keeper:
            if entry.merged_into != keeper or entry.merged_from or entry.unmerged is not None:
                restored: dict[str, object] = dict(own(entry))  # a former keeper gives its own lists back
                out.append(Change(entry=entry, payload={"merged_into": keeper, "merged_from": [], "unmerged": None,
                                                        **restored}))
            continue
        group = sorted(members.get(entry_id, []), key=_order)
        mine = own(entry)
        wanted: dict[str, object] = {"merged_into": None, "merged_from": [e.id for e in group],
                                     "unmerged": mine if group else None}
        wanted.update({name: _union(mine[name], *(own(e)[name] for e in group)) for name in UNIONED})
        if any(getattr(entry, name) != value for name, value in wanted.items()):
            out.append(Change(entry=entry, payload=wanted))
    # Keepers first: a run stopped between the two never leaves a turn held only by hidden entries.
    return sorted(out, key=lambda change: change.payload.get("merged_into") is not None)


def mended(episodes: list[MemoryEntry], erased: set[str], rewritten: frozenset[str] = frozenset()) -> list[Change]:
    """The payload updates that take erased entries out of the merges of the episodes left (a forget's hard delete):
    a keeper that listed one drops it and rebuilds its unions from the members left (so the erased entry's source
    turns, persons, entities and keywords go with it); an episode merged into an erased keeper is visible again
    with its own lists. A keeper that is, or lists, an episode a forget wrote again (`rewritten`: its own lists
    changed) rebuilds its unions too. The next merge job may group what is left anew."""
    by_id = {e.id: e for e in episodes}
    out = []
    for entry in episodes:
        if entry.id in erased:
            continue
        if entry.merged_into in erased:
            out.append(Change(entry=entry, payload={"merged_into": None}))
        elif erased.intersection(entry.merged_from) or (entry.merged_from and (
                entry.id in rewritten or rewritten.intersection(entry.merged_from))):
            members = [by_id[m] for m in entry.merged_from if m in by_id and m not in erased]
            mine = own(entry)
            payload: dict[str, object] = {"merged_from": [m.id for m in members],
                                          "unmerged": mine if members else None}
            payload.update({name: _union(mine[name], *(own(m)[name] for m in members)) for name in UNIONED})
            out.append(Change(entry=entry, payload=payload))
    return out
