"""Outdated: a derived claim is current only while no newer evidence of its person is about the same thing.

The slot rules supersede a fact when a newer statement of the same slot is *read*. People change their lives in
words no rule reads, so this job also asks, for every active fact of an owner, whether a newer episode of the same
owner is about the same thing, the way recall decides it (retrieval/currency.py): the fact's own text is the query
(its stored dense vector and its words in BM25) over the owner's episodes, and an episode is about the same thing
when its fused score is within the band of the best one besides the window the fact was read from (which says it
nearly word for word, a bar evidence in other words seldom reaches). An episode of that band said hours after the
statement (not the same chat, which goes on about other things), that does not repeat the fact's value, was not
where it was read and is not followed, a chat or more later, by an episode of the band that says the value again (A,
then B, then A again is A), outdates it. An episode that names the value beside another value the fact's slot has
held ("Kasimir and I ended it... Leopoldine and I are giving it another try") does not say it again: it is about a
change between them, which no rule read (the slot's values come from the owner's facts, superseded ones included,
so a TTL or a forget that removes the older fact takes that evidence with it). A fact so outdated is marked
`outdated_by` that episode, kept (history is never deleted), left out of the profile's current lines and ranked
below that episode in recall. A fact whose newer evidence goes away (it was forgotten) is unmarked. Relatives by
blood, origins, birthdays and allergies are not marked at all (`LASTING`): later talk of them is no unread change.
The marks are a pure function of the owner's episodes and the facts themselves: BM25 counts its IDF over those
episodes only, since counting the profile too (which the marks shape) made the marks flip on every run.

Dense similarity alone cannot decide this: the windows of one person's chats are all alike to the model (0.90 to
0.94 in Chinese, whatever they are about), so a fact would be outdated by small talk. With its words in the query
the band holds the episodes that talk about what the fact says; precision before coverage.
"""
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from shared.compress.facts.changes import ending
from shared.compress.facts.render import named, verdict, without_stated
from shared.consolidation.changes import Change
from shared.embedding import Bm25Encoder
from shared.store import EntryFilter, HybridSearch, MemoryEntry, Scope, ScoredEntry, Store, Vectors
from shared.text import scripts

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


def _last(value: str, text: str, exact_case: bool = False) -> int:
    """Where the last mention of `value` in `text` starts, or -1: not inside a longer word ("Li" is not in
    "Lisbon", and a value may end in "." as "D.C." does); Han has no word edges to look for."""
    before = "" if scripts.is_han(value[:1]) else r"(?<!\w)"
    after = "" if scripts.is_han(value[-1:]) else r"(?!\w)"
    pattern = before + re.escape(value) + after
    found = list(re.finditer(pattern, text, 0 if exact_case else re.IGNORECASE))
    return found[-1].start() if found else -1


def read_from(fact: MemoryEntry, episode: MemoryEntry) -> bool:
    """Whether the episode is the window the fact was read from (its conversation, a shared turn)."""
    return fact.conversation_id == episode.conversation_id and bool(set(fact.source_turn_ids)
                                                                    & set(episode.source_turn_ids))


def _repeats(fact: MemoryEntry, episode: MemoryEntry, others: frozenset[str] = frozenset()) -> bool:
    """The episode states the fact again (its value, and no other value its slot has held), or is the window the
    fact was read from.

    An episode that names the value beside another of the slot's values ("Kasimir and I ended it... Leopoldine and
    I are giving it another try") is about a change between them, not a restatement: which value holds now is what
    no rule read, so it may outdate the fact and never keeps it current. In whichever order: on the dev halves a
    third of the user turns naming a story's current and a replaced value name the replaced one last ("they're my
    favourite band now. Khruangbin feels...", "after Kaunas, Klaipėda and the garage"), so word order says little of
    which came first. The price is a current value said beside an old one in a later chat ("Porto is calmer than
    Lisbon"): its fact leaves the profile, where a replaced one would have stayed confidently wrong. A name among
    the other values ("May", "Rose") is looked for in its own case, so the month or the flower is not it.
    """
    if read_from(fact, episode):
        return True
    # A liking is not said again by naming its object: a new favourite is told beside the old one ("换成海朋森了！！
    # 惘闻还是很好"), and its verdict ("likes") is no word of it (any window saying "likes" kept every liking current).
    if verdict(fact.attribute) or not fact.value:
        return False
    return _last(fact.value, episode.text) >= 0 and all(
        _last(other, episode.text, exact_case=other != other.lower()) < 0 for other in others)


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
    return {hit.entry.id: sum(1.0 / (rrf_k + best[i][score] - 1) for i, _, score in ranked(hit)) for hit in hits}


def mark(fact: MemoryEntry, hits: Sequence[ScoredEntry], band: float, rrf_k: int,
         others: frozenset[str] = frozenset()) -> str | None:
    """The newer episode about the same thing that outdates `fact`, among the episodes its own text finds (best
    first), or None: within `band` of the best score of an episode it was not read from, at least MIN_GAP after the
    statement, not repeating it, and not followed, MIN_GAP or more later, by an episode of the band that says the
    value again (a revert).

    The window the fact was read from says it nearly word for word, so it takes the first rank of both searches and
    set the bar at its fused score: evidence in other words, a rank or two lower ("officially a Peoria resident"
    after "I live in Dubuque"), fell just short of the band. The best of the other episodes sets it (the source's
    score when there is no other). The scores are fused ranks, which say nothing of how far apart two episodes
    are, so this widens the band by about a rank whenever the source comes first; counting the others' ranks
    among themselves instead left more replaced values standing and marked more current facts on the dev halves.
    `others` are the other values the fact's slot has held (of the owner's facts, superseded ones included): an
    episode naming one of them beside the fact's value does not repeat it (see `_repeats`).

    Scores are fused with ties sharing their rank (see `shared_ranks`). Among episodes of one score the earliest
    is named, then by conversation and turns: the same memory names the same episode in any tenant.
    """
    if not hits or not band:
        return None
    score = shared_ranks(hits, rrf_k)
    cut = (1.0 - band) * max((score[h.entry.id] for h in hits if not read_from(fact, h.entry)),
                             default=max(score.values()) or 1.0)
    # Episodes of the band that say the value again ("back to fully vegan"): one said a chat or more after an
    # episode means that episode no longer outdates the fact (A, then B, then A again is A).
    again = {h.entry.id: h.entry.occurred_at for h in hits
             if score[h.entry.id] >= cut and _repeats(fact, h.entry, others)}
    last = max(again.values(), default=None)
    order = sorted(hits, key=lambda h: (-score[h.entry.id], h.entry.occurred_at, h.entry.conversation_id,
                                        h.entry.source_turn_ids, h.entry.id))
    for hit in order:
        episode = hit.entry
        if (score[episode.id] >= cut and episode.occurred_at >= fact.occurred_at + MIN_GAP
                and episode.id not in again and (last is None or last < episode.occurred_at + MIN_GAP)):
            return episode.id
    return None


def lasting(fact: MemoryEntry) -> bool:
    """Whether the fact is of a kind no unread change replaces (`LASTING`), by its attribute or, for a statement
    the model put in a slot, its slot's."""
    attribute = fact.attribute or (fact.slot_key or "").rpartition("\x1f")[2]
    kind, _, rest = attribute.partition(":")
    return kind in LASTING or f"{kind}:{rest.partition(':')[0]}" in LASTING


def slot_values(history: Sequence[MemoryEntry]) -> dict[str, frozenset[str]]:
    """The values each slot has held among these facts (superseded ones included), endings left out ("no partner"
    is what stopped, and no episode names it)."""
    values: dict[str, set[str]] = {}
    for fact in history:
        if fact.slot_key and fact.value and not ending(fact.attribute, fact.value):
            values.setdefault(fact.slot_key, set()).add(fact.value)
    return {slot: frozenset(found) for slot, found in values.items()}


def _others(fact: MemoryEntry, slots: dict[str, frozenset[str]]) -> frozenset[str]:
    """The other values of the fact's slot that an episode could name instead of its own: not one inside its value
    or holding it ("Google" and "Google Cloud", "阿里" and "阿里巴巴"), nor a word of the fact itself (a pet first
    told unnamed holds its species, "dog", which "Ana has a dog named Rex" says)."""
    own = (fact.value or "").casefold()
    said = without_stated(fact.text).casefold()
    return frozenset(v for v in slots.get(fact.slot_key or "", ())
                     if own not in (folded := v.casefold()) and folded not in own and folded not in said)


async def changes(store: Store, scope: Scope, facts: Sequence[Item], sparse: Bm25Encoder, band: float,
                  rrf_k: int, history: Sequence[MemoryEntry] = ()) -> list[Change]:
    """Search each fact's own text among the owner's episodes and bring its `outdated_by` to what that finds.

    Args:
        history: the owner's facts, superseded ones included, for the values each slot has held.
    """
    slots = slot_values([*history, *(f.entry for f in facts)])
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
    for fact, hits in zip(usable, found, strict=True):
        wanted = mark(fact.entry, hits, band, rrf_k, _others(fact.entry, slots))
        if fact.entry.outdated_by != wanted:
            out.append(Change(entry=fact.entry, payload={"outdated_by": wanted}))
    return out
