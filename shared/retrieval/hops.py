"""The second hop: from the first hits, follow the links engram already stores to candidates the query alone did not
reach, and fuse them with the first pass, in one more engine call.

A question whose answer sits in two sessions ("what did she buy after the concert she went to with Sam?") names one
of them; the other shares the people, things and days of the first one's entries, not the question's words. The
seeds are the best first hits (profiles aside: a summary of everything links to everything). Their links:

- the people, things and words they name that the query does not (`persons`, `entities`, `keywords`): added to the
  BM25 query, so the sparse search reaches the entries naming them;
- a hit naming one of those people is raised, as is one of the same day as a seed (a window next to a seed in its
  conversation is of its day).

That is one more engine call, BM25 alone (the dense search would only repeat the first pass's); a hit it returns
that the first pass did not enters the candidates as one search's rank counts in the fusion, at `weight` times that,
raised when it names a seed's person or is of a seed's day, and `explain` says which links brought it (`via`).

One more link needs no words: a window that ends on a question ("What did you take away from it?") has its answer
in the next window of its conversation, which shares neither the question's words nor the book's name. The best
episodes of the first pass that end on one bring that window when the request's scope and filters allow it
(`answer_reads`: two ordered reads for each, at most `seeds`, in the same engine call as the second hop's search;
`answers`), at `weight` times the asking hit's score (`raise_answers`).
"""
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.compress.offline import spoken
from shared.retrieval.plan import QueryPlan
from shared.store import EntryFilter, MemoryEntry, Scope, ScoredEntry, TimeRead
from shared.store.hits import rrf

# A window this close to another of its conversation is its neighbour: measured between their starts here (`why`),
# from the earlier one's last turn by the follow (`answer_reads`) and by the windows beside a match (recall._smooth).
NEIGHBOUR = timedelta(minutes=30)
MAX_WORDS = 12                     # link words added to the sparse query


@dataclass(frozen=True)
class Links:
    """What the seeds link to: words to search, and the conditions that raise a hit."""

    words: list[str]
    persons: list[str]
    days: list[tuple[datetime, datetime]]
    seeds: list[ScoredEntry]


def links(first: list[ScoredEntry], query_plan: QueryPlan, seeds: int) -> Links:
    """The links of the best `seeds` first hits (not profiles) that the query does not already say."""
    chosen = [h for h in first if h.entry.kind != "profile"][:seeds]
    said = {t.casefold() for t in query_plan.terms} | {n.casefold() for n in query_plan.names}
    counted: Counter[str] = Counter()
    for hit in chosen:
        for word in dict.fromkeys(w.casefold() for w in (*hit.entry.persons, *hit.entry.entities, *hit.entry.keywords)):
            if word not in said and len(word) > 2:
                counted[word] += 1
    persons = list(dict.fromkeys(p for h in chosen for p in h.entry.persons if p.casefold() not in said))
    days = []
    for hit in chosen:
        start = hit.entry.occurred_at.replace(hour=0, minute=0, second=0, microsecond=0)
        if (start, start + timedelta(days=1)) not in days:
            days.append((start, start + timedelta(days=1)))
    return Links(words=[w for w, _ in counted.most_common(MAX_WORDS)], persons=persons, days=days, seeds=chosen)


def why(hit: ScoredEntry, found: Links) -> list[str]:
    """Which links of the seeds a second-hop hit shares."""
    entry = hit.entry
    out = []
    mine = {w.casefold() for w in (*entry.persons, *entry.entities, *entry.keywords)}
    shared_words = [w for w in found.words if w in mine or w in entry.text.casefold()]
    if shared_words:
        out.append(f"names what a first hit names: {', '.join(shared_words[:5])}")
    for seed in found.seeds:
        if seed.entry.conversation_id == entry.conversation_id and \
                abs(seed.entry.occurred_at - entry.occurred_at) <= NEIGHBOUR:
            out.append(f"next to first hit {seed.entry.id} in its conversation")
            break
    for seed in found.seeds:
        if seed.entry.occurred_at.date() == entry.occurred_at.date():
            out.append(f"same day as first hit {seed.entry.id}")
            break
    people = [p for p in entry.persons if p in found.persons]
    if people:
        out.append(f"names a person a first hit names: {', '.join(people[:3])}")
    return out or ["found by the widened search"]


def _linked(entry: MemoryEntry, found: Links) -> bool:
    """Whether an entry names a person a seed names or is of a seed's day."""
    return any(p in found.persons for p in entry.persons) or \
        any(start <= entry.occurred_at < end for start, end in found.days)


def fuse(first: list[ScoredEntry], second: list[ScoredEntry], found: Links, weight: float, boost: float,
         rrf_k: int) -> tuple[list[ScoredEntry], dict[str, list[str]]]:
    """The first hits with the second search's new ones, best first, and why each new one came.

    A new hit scores as reciprocal rank fusion would count its rank in one search (`rrf`), times `weight`, raised by
    `boost` when it names a seed's person or is of a seed's day. Its rank is in another search than the first
    pass's, so none is carried (currency counts the first pass's ranks again).
    """
    seen = {h.entry.id for h in first}
    added = [h.model_copy(update={
        "score": weight * rrf(rank, rrf_k) * (1 + (boost if _linked(h.entry, found) else 0.0)),
        "dense_rank": None, "dense_score": None, "sparse_rank": None, "sparse_score": None})
        for rank, h in enumerate(second, start=1) if h.entry.id not in seen]
    merged = sorted([*first, *added], key=lambda h: h.score, reverse=True)
    return merged, {h.entry.id: why(h, found) for h in added}


QUESTION_MARKS = "?？؟"
READ = 5  # entries read after each asking hit: its next window, with others that begin at the same instant
ALLOWED_READ = 4 * READ  # the same under the request's filters, which may order those of one instant otherwise


def asks(entry: MemoryEntry) -> bool:
    """Whether an episode ends on a question: its last turn's own words (a shared photo's caption aside) end with a
    question mark, give or take closing quotes, brackets, marks or emoji ("…from it?", "right?!", "…?\" :)")."""
    lines = entry.text.split("\n")
    span = entry.turn_lines[-1] if entry.turn_lines else None
    turn = "\n".join(lines[span.first:span.last + 1]) if span and span.first <= span.last < len(lines) else lines[-1]
    words = spoken(turn).rstrip()
    mark = max(words.rfind(m) for m in QUESTION_MARKS)
    return mark >= 0 and not any(c.isalnum() for c in words[mark + 1:])


def _own_turns(entry: MemoryEntry) -> set[str]:
    """The turns an entry holds itself (a merged keeper's source turns include its members', of any conversation)."""
    return set(entry.unmerged.get("source_turn_ids", [])) if entry.unmerged else set(entry.source_turn_ids)


def next_window(seed: MemoryEntry, later: list[MemoryEntry]) -> MemoryEntry | None:
    """The window right after the seed among `later` (the episodes of its conversation from its last turn on,
    earliest first): one that begins after the seed begins and holds none of its turns."""
    own = _own_turns(seed)
    return next((e for e in later if e.id != seed.id and e.occurred_at > seed.occurred_at
                 and not own & _own_turns(e)), None)


def asking(hits: list[ScoredEntry], seeds: int) -> list[ScoredEntry]:
    """The best `seeds` episodes of the first pass that end on a question."""
    return [h for h in [h for h in hits if h.entry.kind == "episodic"][:seeds] if asks(h.entry)]


def _within(entry_filter: EntryFilter, since: datetime, until: datetime) -> EntryFilter:
    """The request's filter, for its episodes of [since, until] only."""
    return entry_filter.model_copy(update={
        "kinds": ["episodic"], "since": max(since, entry_filter.since) if entry_filter.since else since,
        "until": min(until, entry_filter.until) if entry_filter.until else until})


def answer_reads(scope: Scope, entry_filter: EntryFilter, asked: list[ScoredEntry]) -> list[TimeRead]:
    """Two reads for each asking hit (`asking`), in its conversation within the request's scope: the episodes that
    begin at most NEIGHBOUR after its last turn, whatever the request's filters (the next window is among the first
    of them), and the same episodes under the request's filters (the next window may come only when it is among
    them); none when the request's filter keeps episodes out. A next window that begins at the same instant as more
    than ALLOWED_READ other episodes may be missed, never replaced."""
    if entry_filter.kinds and "episodic" not in entry_filter.kinds:
        return []
    out = []
    for hit in asked:
        seed = hit.entry
        last = seed.ended_at
        conversation = Scope(tenant_id=scope.tenant_id, user_id=scope.user_id, conversation_id=seed.conversation_id)
        out += [TimeRead(scope=conversation, limit=READ,
                         entry_filter=EntryFilter(kinds=["episodic"], since=last, until=last + NEIGHBOUR)),
                TimeRead(scope=conversation, limit=ALLOWED_READ,
                         entry_filter=_within(entry_filter, last, last + NEIGHBOUR))]
    return out


def answers(asked: list[ScoredEntry], read: list[list[ScoredEntry]]) -> list[tuple[ScoredEntry, MemoryEntry]]:
    """The windows that answer the questions the asking hits end on, each with its asking hit, from the reads
    `answer_reads` made for them (in its order; none read, none found): the next episode of the asking one's
    conversation, when the request's scope and filters allow it (when they do not, nothing comes in its place)."""
    if not read:
        return []
    found = []
    for i, hit in enumerate(asked):
        answer = next_window(hit.entry, [h.entry for h in read[2 * i]])
        if answer is not None and any(h.entry.id == answer.id for h in read[2 * i + 1]):
            found.append((hit, answer))
    return found


def raise_answers(hits: list[ScoredEntry], found: list[tuple[ScoredEntry, MemoryEntry]],
                  weight: float) -> tuple[list[ScoredEntry], dict[str, list[str]]]:
    """The hits with the answers `answers` found, best first, and why each of those came or rose: an answer scores
    `weight` times its asking hit's score, or keeps its own when that is higher."""
    by_id = {h.entry.id: h for h in hits}
    reasons: dict[str, list[str]] = {}
    for hit, answer in found:
        score = weight * hit.score
        if answer.id in by_id and by_id[answer.id].score >= score:
            continue
        known = by_id.get(answer.id)
        by_id[answer.id] = known.model_copy(update={"score": score}) if known else ScoredEntry(entry=answer,
                                                                                                 score=score)
        reasons[answer.id] = [f"answers the question hit {hit.entry.id} ends on"]
    if not reasons:
        return hits, {}
    return sorted(by_id.values(), key=lambda h: h.score, reverse=True), reasons
