"""Packing ranked entries into a token budget: the best set that fits, one entry for each piece of evidence.

Walking the hits in rank order, an entry is packed when it fits what is left of the budget and brings evidence the
packed entries do not hold already (a source turn of its conversation none of them holds). Of entries with the
same evidence the shortest is packed, in the place of the best ranked; an entry packed earlier whose evidence a
later packed one holds entirely is taken out again and its tokens return to the budget (a fact after the window
that states it). A profile (a summary of many facts) holds no turn's words, so it neither holds nor is held.

What fits no more, among the hits the limit lets in, is counted: how many entries and tokens a larger budget would
add (duplicates of packed evidence are not counted).
"""
from collections.abc import Callable
from dataclasses import dataclass

from shared.store import ScoredEntry

Evidence = frozenset[tuple[str, str]]


@dataclass(frozen=True)
class Packed:
    """The packed hits in rank order, and the relevant ones the budget left out (count and tokens)."""

    hits: list[ScoredEntry]
    left_out: int = 0
    left_out_tokens: int = 0


def evidence(hit: ScoredEntry) -> Evidence:
    """The turns an entry holds, by conversation (none for a profile)."""
    entry = hit.entry
    if entry.kind == "profile":
        return frozenset()
    return frozenset((entry.conversation_id, t) for t in entry.source_turn_ids)


def _shortest_of_each(hits: list[ScoredEntry], cost: Callable[[ScoredEntry], int]) -> list[ScoredEntry]:
    """The hits in rank order, each group with the same evidence reduced to its shortest, at the group's best rank."""
    best: dict[Evidence, ScoredEntry] = {}
    for hit in hits:
        held = evidence(hit)
        if held and (held not in best or cost(hit) < cost(best[held])):
            best[held] = hit
    out, seen = [], set()
    for hit in hits:
        held = evidence(hit)
        if not held:
            out.append(hit)
        elif held not in seen:
            seen.add(held)
            out.append(best[held])
    return out


def pack(hits: list[ScoredEntry], cost: Callable[[ScoredEntry], int], room: int) -> Packed:
    """The best set of `hits` (ranked) whose costs sum to at most `room` tokens, in rank order.

    Args:
        cost: an entry's tokens in the context (with its separator).
        room: the tokens the entries may take (the budget less the header's). When not even the best entry fits,
            it alone is returned (the context shortens it rather than return nothing).
    """
    ranked = _shortest_of_each(hits, cost)
    packed: dict[int, ScoredEntry] = {}
    used = 0

    def held() -> set[tuple[str, str]]:
        return {turn for h in packed.values() for turn in evidence(h)}

    for _ in range(2):  # a second walk fills the tokens that entries taken out gave back
        for i, hit in enumerate(ranked):
            mine = evidence(hit)
            if i in packed or (mine and mine <= held()):
                continue  # packed, or its evidence is
            tokens = cost(hit)
            if used + tokens > room:
                continue
            packed[i] = hit
            used += tokens
            for j in [j for j, h in packed.items() if j != i and evidence(h) and evidence(h) <= mine]:
                used -= cost(packed.pop(j))  # held entirely by the new one: it goes, and gives its tokens back
    if not packed and ranked:
        return Packed([ranked[0]], *_left([ranked[0]], ranked[1:], cost))
    kept = [packed[i] for i in sorted(packed)]
    return Packed(kept, *_left(kept, [h for i, h in enumerate(ranked) if i not in packed], cost))


def _left(kept: list[ScoredEntry], rest: list[ScoredEntry], cost: Callable[[ScoredEntry], int]) -> tuple[int, int]:
    """How many of `rest` bring evidence `kept` does not hold, and their tokens."""
    held = {turn for h in kept for turn in evidence(h)}
    left = [h for h in rest if not (evidence(h) and evidence(h) <= held)]
    return len(left), sum(cost(h) for h in left)
