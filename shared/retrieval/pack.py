"""Packing ranked entries into a token budget: the best set that fits, one entry for each piece of evidence.

Walking the hits in rank order, an entry is packed when it fits what is left of the budget and brings evidence the
packed entries do not hold already (a source turn of its conversation none of them holds). Of entries with the
same evidence the shortest is packed, in the place of the best ranked (a derived claim only in its own place or
below: never above the newer evidence its ranking put above it; and once an entry that is not a claim did not fit,
no claim goes in after that, on either walk); an entry packed earlier whose evidence a
later packed one holds entirely is taken out again and its tokens return to the budget (a fact after the window
that states it). A profile (a summary of many facts) holds no turn's words, so it neither holds nor is held.

What fits no more, among the hits the limit lets in, is counted: how many entries and tokens a larger budget would
add (duplicates of packed evidence are not counted).
"""
from collections.abc import Callable
from dataclasses import dataclass

from shared.retrieval.currency import DERIVED
from shared.store import ScoredEntry

Evidence = frozenset[tuple[str, str]]


@dataclass(frozen=True)
class Packed:
    """The packed hits in rank order, and the relevant ones the budget left out (count and tokens)."""

    hits: list[ScoredEntry]
    left_out: int = 0
    left_out_tokens: int = 0


def evidence(hit: ScoredEntry) -> Evidence:
    """The turns an entry holds of its own conversation (none for a profile). A keeper of merged duplicates lists
    their turns too, under their own conversations' ids (a product numbers turns 1, 2, 3 in every chat): only its
    own turns, from before the merge, are read as its conversation's."""
    entry = hit.entry
    if entry.kind == "profile":
        return frozenset()
    own = entry.unmerged.get("source_turn_ids", []) if entry.unmerged is not None else entry.source_turn_ids
    return frozenset((entry.conversation_id, t) for t in own)


def _shortest_of_each(hits: list[ScoredEntry], cost: dict[str, int]) -> list[ScoredEntry]:
    """The hits in rank order, each group with the same evidence reduced to its shortest (`cost` by entry id), at the
    group's best rank. A derived claim (a fact) stands in only for the ones ranked below it, never above where its
    ranking put it (below the newer evidence against it, respond.picking_order)."""
    best: dict[Evidence, ScoredEntry] = {}
    for hit in hits:
        held = evidence(hit)
        if held and (held not in best or (cost[hit.entry.id] < cost[best[held].entry.id]
                                          and hit.entry.kind not in DERIVED)):
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
        room: the tokens the entries may take (the budget less the header's and what is kept for recent turns).
            When the best entry does not fit, it alone is returned (the context shortens it rather than drop the
            best memory); with no room at all, nothing.
    """
    tokens = {h.entry.id: cost(h) for h in hits}  # each entry's cost counted once
    ranked = _shortest_of_each(hits, tokens)
    held_by = [evidence(h) for h in ranked]
    costs = [tokens[h.entry.id] for h in ranked]
    if not ranked or room <= 0:
        return Packed([], *_left(ranked, set(), costs, held_by))
    if costs[0] > room:
        return Packed([ranked[0]], *_left(ranked, {0}, costs, held_by))
    packed: set[int] = set()
    holders: dict[tuple[str, str], set[int]] = {}  # a turn -> the packed entries holding it
    used = 0
    left_evidence = False  # an entry that is not a derived claim did not fit: no claim goes in after that
    for _ in range(2):  # a second walk fills the tokens that entries taken out gave back
        for i, mine in enumerate(held_by):
            if i in packed or (mine and all(holders.get(turn) for turn in mine)):
                continue  # packed, or its evidence is
            derived = ranked[i].entry.kind in DERIVED
            if used + costs[i] > room or (derived and left_evidence):
                left_evidence = left_evidence or not derived
                continue
            packed.add(i)
            used += costs[i]
            for turn in mine:
                holders.setdefault(turn, set()).add(i)
            # a packed entry the new one holds entirely shares a turn with it: it goes, and gives its tokens back
            near = set().union(*(holders[turn] for turn in mine)) - {i} if mine else set()
            for j in sorted(near):
                if held_by[j] and held_by[j] <= mine:
                    packed.discard(j)
                    used -= costs[j]
                    for turn in held_by[j]:
                        holders[turn].discard(j)
    return Packed([ranked[i] for i in sorted(packed)], *_left(ranked, packed, costs, held_by))


def _left(ranked: list[ScoredEntry], kept: set[int], costs: list[int], held_by: list[Evidence]) -> tuple[int, int]:
    """How many entries not kept bring evidence the kept ones do not hold, and their tokens."""
    held = {turn for i in kept for turn in held_by[i]}
    left: dict[object, int] = {}  # each piece of evidence left out once, at its shortest
    for i in range(len(ranked)):
        if i not in kept and not (held_by[i] and held_by[i] <= held):
            key = held_by[i] or i  # a profile holds no turn: each counts
            left[key] = min(left.get(key, costs[i]), costs[i])
    return len(left), sum(left.values())
