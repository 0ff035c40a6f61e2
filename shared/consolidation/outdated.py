"""Outdated: a derived claim is current only while no newer evidence of its person is about the same thing.

The slot rules supersede a fact when a newer statement of the same slot is *read*. People change their lives in
words no rule reads ("we finally unpacked the last boxes in Graz"), so this job also asks, for every active fact
of an owner, whether a newer episode of the same owner is about the same thing: its dense vector is close to the
fact's (cosine at least `threshold`), it was said hours later (not in the same chat, which goes on about the same
things without changing them), and it does not repeat the fact's value. Such a fact is marked `outdated_by` that
episode: kept (history is never deleted), left out of the profile's current lines, and ranked below that episode
in recall. A fact whose newer evidence goes away (it was forgotten) is unmarked. The marks are a pure function of
the stored texts, vectors and times.
"""
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from shared.consolidation.changes import Change
from shared.store import MemoryEntry

MIN_GAP = timedelta(hours=6)


@dataclass(frozen=True)
class Item:
    """An entry and its dense vector."""

    entry: MemoryEntry
    dense: list[float]


def _unit(vectors: list[list[float]]) -> np.ndarray:
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def _repeats(fact: MemoryEntry, episode: MemoryEntry) -> bool:
    """The episode states the fact again (its value), or is the window the fact was read from."""
    if set(fact.source_turn_ids) & set(episode.source_turn_ids):
        return True
    return fact.value is not None and fact.value.casefold() in episode.text.casefold()


def marks(facts: list[Item], episodes: list[Item], threshold: float,
          min_gap: timedelta = MIN_GAP) -> dict[str, str | None]:
    """For every fact, the newer episode about the same thing that outdates it (the closest one), else None.

    Args:
        min_gap: how much later than the statement the episode must be: the rest of the same chat goes on about
            the same things without changing them ("I love hiking." ... "I'm allergic to peanuts.").
    """
    out: dict[str, str | None] = {f.entry.id: None for f in facts}
    usable = [e for e in episodes if e.dense]
    if not facts or not usable:
        return out
    facts_with = [f for f in facts if f.dense]
    if not facts_with:
        return out
    sims = _unit([f.dense for f in facts_with]) @ _unit([e.dense for e in usable]).T
    for row, fact in enumerate(facts_with):
        best: tuple[float, str] | None = None
        for col, episode in enumerate(usable):
            similarity = float(sims[row, col])
            if (similarity < threshold or episode.entry.occurred_at < fact.entry.occurred_at + min_gap
                    or _repeats(fact.entry, episode.entry)):
                continue
            if best is None or (similarity, episode.entry.id) > best:
                best = (similarity, episode.entry.id)
        out[fact.entry.id] = best[1] if best else None
    return out


def changes(facts: list[Item], episodes: list[Item], threshold: float) -> list[Change]:
    """The payload updates that bring each fact's `outdated_by` to its mark (none when it already is)."""
    wanted = marks(facts, episodes, threshold)
    return [Change(entry=f.entry, payload={"outdated_by": wanted[f.entry.id]}) for f in facts
            if f.entry.outdated_by != wanted[f.entry.id]]
