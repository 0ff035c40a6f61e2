"""Outdated: a derived claim is current only while no newer evidence of its person is about the same thing.

The slot rules supersede a fact when a newer statement of the same slot is *read*. People change their lives in
words no rule reads, so this job also asks, for every active fact of an owner, whether a newer episode of the same
owner is about the same thing, the way recall decides it (retrieval/currency.py): the fact's own text is the query
(its stored dense vector and its words in BM25) over the owner's episodes, and an episode is about the same thing
when its fused score is within the band of the best one besides the window the fact was read from (which says it
nearly word for word, a bar evidence in other words seldom reaches). An episode of that band said hours after the
statement (not the same chat, which goes on about other things) that the fact was not read from outdates it; so does
one of the same conversation said after the statement that states a figure or a date again (evidence/restated.py: it
holds what the fact is about and another value of the fact's kind), read by the rules or not: a correction a minute
later, a count reported again within the hour.

Only the rules' own reading says a fact again: a restatement they read is the slot's newest statement
(supersede.py), so the fact is dated from it and its window is the fact's own; the windows of earlier statements,
older than it, can outdate nothing (turn ids are unique within a conversation only, so those of another chat are not
matched). An episode that merely names the value is evidence about the same thing, not a restatement: a pet is named
when it moves out ("mango now lives with my niece"), a city when it was left ("since leaving Berlin"), an old
favourite when its new album disappoints, an ex when the user runs into him. Counting those as saying the fact again
kept replaced values in profiles; it also kept current ones, so a profile now states fewer values, each with
evidence no newer chat talked past (precision before coverage). A fact so outdated is marked `outdated_by` that
episode, kept (history is never deleted), left out of the profile's current lines and ranked below that episode in
recall. A fact whose newer evidence goes away (it was forgotten) is unmarked. Relatives by blood, origins, birthdays
and allergies are not marked at all (`LASTING`): later talk of them is no unread change. The marks are a pure
function of the owner's episodes and the facts themselves: BM25 counts its IDF over those episodes only, since
counting the profile too (which the marks shape) made the marks flip on every run.

Dense similarity alone cannot decide this: the windows of one person's chats are all alike to the model (0.90 to
0.94 in Chinese, whatever they are about), so a fact would be outdated by small talk. With its words in the query
the band holds the episodes that talk about what the fact says; precision before coverage.
"""
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from shared.compress.facts.render import named, without_stated
from shared.compress.model import Slot
from shared.consolidation.changes import Change
from shared.embedding import Bm25Encoder
from shared.evidence import figures
from shared.evidence.restated import Reader, kind_of
from shared.store import EntryFilter, HybridSearch, MemoryEntry, Scope, ScoredEntry, Store, Vectors
from shared.store.hits import rrf

MIN_GAP = timedelta(hours=6)
CANDIDATES = 10  # episodes looked at per fact
# Kinds of facts that newer evidence cannot quietly replace: a relative by blood and name (a sister stays one,
# whatever is said of her later; a spouse the model filed as family does not), where a person is from, a birthday,
# an allergy (said to be over, it is read like any statement). Newer episodes about them say more about them, not
# that they changed, so they are never marked possibly outdated.
LASTING = frozenset({"family:sister", "family:brother", "family:son", "family:daughter", "family:mother",
                     "family:father", "from", "birthday", "allergy"})


@dataclass(frozen=True)
class Item:
    """An entry and its dense vector."""

    entry: MemoryEntry
    dense: list[float]


def read_from(fact: MemoryEntry, episode: MemoryEntry) -> bool:
    """Whether the episode is a window the fact was read from: its conversation (the newest statement's, when the
    rules read it again) and a shared turn."""
    return fact.conversation_id == episode.conversation_id and bool(set(fact.source_turn_ids)
                                                                    & set(episode.source_turn_ids))


def _asked(fact: MemoryEntry) -> str:
    """The fact's words without what it names and its date: what it is about ("Lena lives in", "Teodor's favourite
    band is"), which newer evidence of a different value shares, unlike the value itself."""
    text = without_stated(fact.text)
    value = named(fact.attribute, fact.value)
    if value:
        text = re.sub(re.escape(value), " ", text, flags=re.IGNORECASE)
    return text


def shared_ranks(hits: Sequence[ScoredEntry], rrf_k: int) -> dict[str, float]:
    """Each hit's fused score (reciprocal rank fusion, as the engine computes it) with ties sharing their best rank;
    the engine's own scores when the hits carry no ranks (a search not explained).

    Episodes that score the same in a search (one window kept from two chats; short lines that share only a name
    with the query) tie there, and the engine breaks the tie by id, which embeds the tenant: without this the same
    memory would get different marks in different tenants.

    Raises:
        ValueError: some hits carry ranks and others none (two scales that cannot be compared).
    """
    def ranked(h: ScoredEntry) -> list[tuple[int, int, float]]:
        """(search, rank, score) for each search (0 dense, 1 sparse) the hit has a rank in."""
        pairs = ((h.dense_rank, h.dense_score), (h.sparse_rank, h.sparse_score))
        return [(i, rank, score) for i, (rank, score) in enumerate(pairs) if rank is not None and score is not None]

    if not any(ranked(h) for h in hits):
        return {h.entry.id: h.score for h in hits}
    if not all(ranked(h) for h in hits):
        raise ValueError("hits with and without their ranks in the dense and sparse searches cannot be compared")
    best: list[dict[float, int]] = [{}, {}]  # per search: a score's best (1-based) rank among the hits
    for hit in hits:
        for i, rank, score in ranked(hit):
            best[i][score] = min(best[i].get(score, rank), rank)
    return {hit.entry.id: sum(rrf(best[i][score], rrf_k) for i, _, score in ranked(hit)) for hit in hits}


def restates(fact: MemoryEntry, episode: MemoryEntry, reader: Reader) -> bool:
    """Whether an episode said after the statement states again what the fact is about with another value of its
    kind, in the fact's conversation. Only a figure or a date can be told apart from talk about it this way: a later
    window that shares a name's or a state's words ("I love living by the sea" after "I live in Lisbon") says more about
    it, not that it changed, and is left to the MIN_GAP rule."""
    if episode.occurred_at <= fact.occurred_at:
        return False
    value = named(fact.attribute, fact.value) or ""
    kind = kind_of(value) if value else None
    if kind is None or _says(reader.own_lines(episode), value):
        return False  # no value of a kind to state again, or the same value said again: no change
    return reader.restates(episode, fact, reader.subject(_asked(fact), kind=kind)) is not None


def _says(lines: str, value: str) -> bool:
    """Whether the lines state the value: its numbers among theirs when it has any ("30" is not in "300",
    "42,000" is "42000"), else its words."""
    wanted = figures.numbers(value)
    if wanted:
        return wanted <= figures.numbers(lines)
    return value.casefold() in lines.casefold()


def mark(fact: MemoryEntry, hits: Sequence[ScoredEntry], band: float, rrf_k: int,
         reader: Reader | None = None) -> str | None:
    """The newer episode about the same thing that outdates `fact`, among the episodes its own text finds (best
    first), or None: within `band` of the best score of an episode it was not read from, not one of its own
    windows, and at least MIN_GAP after the statement or, with a `reader`, after it and stating it again.

    The window the fact was read from says it nearly word for word, so it takes the first rank of both searches and
    set the bar at its fused score: evidence in other words, a rank or two lower ("officially a Peoria resident"
    after "I live in Dubuque"), fell just short of the band. The best of the other episodes sets it. The scores are
    fused ranks, which say nothing of how far apart two episodes are, so this widens the band by about a rank
    whenever the source comes first; counting the others' ranks among themselves instead left more replaced values
    standing and marked more current facts on the dev halves.

    Scores are fused with ties sharing their rank (see `shared_ranks`). Among episodes of one score the earliest
    is named, then by conversation and turns: the same memory names the same episode in any tenant.
    """
    if not hits or not band:
        return None
    score = shared_ranks(hits, rrf_k)  # over every hit: the source's ranks shape the others'
    others = [h for h in hits if not read_from(fact, h.entry)]
    if not others:
        return None
    cut = (1.0 - band) * max(score[h.entry.id] for h in others)
    order = sorted(others, key=lambda h: (-score[h.entry.id], h.entry.occurred_at, h.entry.conversation_id,
                                          h.entry.source_turn_ids, h.entry.id))
    for hit in order:
        if score[hit.entry.id] >= cut and (hit.entry.occurred_at >= fact.occurred_at + MIN_GAP or (
                reader is not None and restates(fact, hit.entry, reader))):
            return hit.entry.id
    return None


def lasting(fact: MemoryEntry) -> bool:
    """Whether the fact is of a kind no unread change replaces (`LASTING`), by its attribute or, for a statement
    the model put in a slot, its slot's."""
    attribute = fact.attribute or Slot.attribute_of(fact.slot_key or "")
    kind, _, rest = attribute.partition(":")
    return kind in LASTING or f"{kind}:{rest.partition(':')[0]}" in LASTING


async def changes(store: Store, scope: Scope, facts: Sequence[Item], sparse: Bm25Encoder, band: float,
                  rrf_k: int) -> list[Change]:
    """Search each fact's own text among the owner's episodes and bring its `outdated_by` to what that finds."""
    usable: list[Item] = []
    out: list[Change] = []
    for f in facts:
        if f.dense and not lasting(f.entry):
            usable.append(f)
        elif f.entry.outdated_by:  # unsearchable (no vector) or lasting: no mark rather than a stale one
            out.append(Change(entry=f.entry, payload={"outdated_by": None}))
    if not usable:
        return out
    episodes = EntryFilter(kinds=["episodic"], include_merged=False)
    searches = [HybridSearch(vectors=Vectors(dense=f.dense, sparse=sparse.query(_asked(f.entry))),
                             limit=CANDIDATES, entry_filter=episodes, prefetch_limit=CANDIDATES * 2, rrf_k=rrf_k,
                             idf_corpus=episodes)
                for f in usable]
    found = await store.hybrid_batch(scope, searches, explain=True)
    reader = Reader(sparse)
    for fact, hits in zip(usable, found, strict=True):
        wanted = mark(fact.entry, hits, band, rrf_k, reader)
        if fact.entry.outdated_by != wanted:
            out.append(Change(entry=fact.entry, payload={"outdated_by": wanted}))
    return out
