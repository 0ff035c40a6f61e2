"""Current by default: among the hits about the same thing, a question about the present gets the newest evidence
first, a question about an earlier state the older one, and a derived claim never stands above newer evidence.

No rule has to recognise what the memories say. "About the same thing" is measured, not parsed: a hit of the top k
belongs to the band when its relevance (its fused dense + BM25 score, boosts included but not what the windows
beside a match added, recall._smooth, with its ranks counted among hits of its own kind: `among_own_kind`) is at
least `1 - band` of the best-matching episode's (the evidence: a fact is short and distilled, so it would set a bar
no rambling episode reaches). Within the band, hits trade places:
each keeps its relevance and gains for being newer (older, for an earlier state): of n chats in the band, the
newest gains `weight`, the one before it (n - 1)/n of it, and so on to 1/n for the oldest. Age is counted in
chats, not days: a person who talks every day and one who talks twice a year are ordered alike, and between two
older chats the newer still comes first when the newest one does not restate the value. A hit less than
`SAME_CHAT` after the one before it is of its chat, and the windows of a chat, minutes apart, are ordered by
relevance, except that a window stating again what an earlier one of its conversation said (evidence/restated.py:
a correction, a count reported again, a date moved) takes the chat's share of the gain and the windows said before
it about that thing a part of it. A window of small talk (a few words of its own, "thanks, have fun!") gains nothing for
its age, counts for no date of the band and is no evidence a derived claim yields to: it says nothing of how things
stand, and a short text can match a short question closely by chance. So too, for a question that asks for a figure
("how many", "多少", "the p95 latency"), an entry whose lines state no number (figures.py): it cannot say what the
figure is now, be it a window or a claim derived from one. Only the hits relevance already put in the top k trade
places (time orders what relevance picked; with a derived claim among them, the top k as they were before the windows
beside a match raised any: `rerank`), and hits outside the band keep theirs.

How much newer counts depends on how the question asks about the present (tense.py): a time word ("now",
"currently", "现在") means the asker expects things to have changed, so `weight` applies; the present tense alone
("who is her partner?") applies `tense_weight` (as large by default: the question may be about something that
changed without saying so; smaller, newer evidence comes first only over older evidence at most that much more
relevant). A question about a past event ("when did she move?") is left to relevance alone.

Derived claims yield to evidence. A fact is ranked as the evidence it came from (right after its source episode,
when that is among the top k); on a question about the present it also ranks below each in-band episode said at
least `SAME_CHAT` after its statement or later in its conversation stating it again, a profile (whose lines have
many ages) below every in-band episode, and a fact the consolidator marked possibly outdated below the episode that
outdates it.
"""
import bisect
import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from shared.consolidation.importance import small_talk
from shared.consolidation.outdated import MIN_GAP, read_from
from shared.evidence import figures
from shared.evidence.restated import Reader, Restatement, Subject
from shared.retrieval.tense import Reading
from shared.store import ScoredEntry
from shared.store.hits import rrf

DERIVED = ("fact", "profile")
# Evidence counts as newer than a statement only when said this much later: the rest of the same chat goes on
# about other things without changing it (consolidation's outdated marks use the same gap).
SAME_CHAT = MIN_GAP


@dataclass(frozen=True)
class Currency:
    """The band (a share of the best episode's relevance) and the gains, in units of that relevance."""

    band: float
    weight: float
    tense_weight: float | None = None  # the gain when only the tense, no time word, says "the present" (None: weight)
    rrf_k: int = 3  # the fusion's k (ENGRAM_RRF_K), to count a hit's ranks again among its own kind


def _day(when: datetime) -> str:
    return when.date().isoformat()


@dataclass(frozen=True)
class Restating:
    """What judges restatements for one question: the reader and the question as its subject."""

    reader: Reader
    subject: Subject

    def restates(self, later: ScoredEntry, earlier: ScoredEntry) -> Restatement | None:
        """How the later hit states again what the earlier one said, if it does (it must be said later)."""
        if later.entry.occurred_at <= earlier.entry.occurred_at:
            return None
        return self.reader.restates(later.entry, earlier.entry, self.subject)


def _newer_than(claim: ScoredEntry, evidence: ScoredEntry, restating: Restating | None) -> str | None:
    """Why an episode is newer evidence than a derived claim about the question, if it is: said `SAME_CHAT` after
    the statement, or later in its conversation and stating it again (not the window the claim was read from)."""
    if evidence.entry.occurred_at >= claim.entry.occurred_at + SAME_CHAT:
        return f"newer than its statement ({_day(claim.entry.occurred_at)} < {_day(evidence.entry.occurred_at)})"
    if restating is None or read_from(claim.entry, evidence.entry):
        return None
    again = restating.restates(evidence, claim)
    return None if again is None else f"said after its statement, {again.why()}"


def _yield_to_evidence(order: list[ScoredEntry], chatter: set[str],
                       restating: Restating | None) -> tuple[list[ScoredEntry], dict[str, str]]:
    """Move each derived claim below newer evidence after it (episodes not in `chatter`); a profile below it all."""
    reasons: dict[str, str] = {}
    out = list(order)
    for claim in [h for h in order if h.entry.kind in DERIVED]:
        i = out.index(claim)
        profile = claim.entry.kind == "profile"
        later = [(j, why) for j in range(i + 1, len(out)) if out[j].entry.kind == "episodic"
                 and out[j].entry.id not in chatter
                 and (why := "" if profile else _newer_than(claim, out[j], restating)) is not None]
        if later:
            last, why = later[-1]
            evidence = out[last].entry
            out.insert(last, out.pop(i))
            reasons[claim.entry.id] = (f"derived claim ({claim.entry.kind}) placed below evidence about the same "
                                       "question" + (f": {why}; entry {evidence.id}" if why else ""))
    return out, reasons


def _outdated(hits: list[ScoredEntry], present: bool) -> tuple[list[ScoredEntry], dict[str, str]]:
    """Facts the consolidator marked possibly outdated: said so, and for a question about now placed right below
    the newer evidence that outdates them when it is among these hits (the top k)."""
    reasons: dict[str, str] = {}
    out = list(hits)
    for hit in [h for h in hits if h.entry.outdated_by]:
        by = hit.entry.outdated_by
        where = next((j for j, h in enumerate(out) if h.entry.id == by), None)
        reasons[hit.entry.id] = f"possibly outdated: newer evidence (entry {by}) is about the same thing"
        i = out.index(hit)
        if present and where is not None and where > i:
            out.insert(where, out.pop(i))
            reasons[hit.entry.id] += f", ranked below it ({_day(out[where - 1].entry.occurred_at)})"
    return out, reasons


def _source_of(claim: ScoredEntry, hits: list[ScoredEntry]) -> int | None:
    """Where the episode a fact was read from stands among the hits (its conversation, a shared turn), if there."""
    return next((i for i, h in enumerate(hits) if h.entry.kind == "episodic" and read_from(claim.entry, h.entry)),
                None)


def _as_evidence(hits: list[ScoredEntry]) -> tuple[list[ScoredEntry], dict[str, str]]:
    """Each fact ranked as the evidence it came from: right after its source episode when that stands below it
    (a short, distilled claim matches a query better than the chat it was read from, never more truly)."""
    reasons: dict[str, str] = {}
    out = list(hits)
    for claim in [h for h in hits if h.entry.kind == "fact"]:
        i = out.index(claim)
        source = _source_of(claim, out)
        if source is not None and source > i:
            out.insert(source, out.pop(i))
            reasons[claim.entry.id] = (f"derived claim ranked as the evidence it came from (entry "
                                       f"{out[source - 1].entry.id}), right after it")
    return out, reasons


def rerank(hits: list[ScoredEntry], reading: Reading, currency: Currency, k: int | None = None,
           figure: figures.Asked | None = None, engine_fused: bool = True,
           restating: Restating | None = None, lifts: Mapping[str, float] | None = None
           ) -> tuple[list[ScoredEntry], dict[str, list[str]]]:
    """The hits in their order for the time the question asks about, and why each one moved.

    Only the first `k` hits trade places (all when None): relevance picks what is returned, time orders it.
    `figure` is how the question asks for a figure ("how many"), if it does: a window stating none is then no
    evidence of what the figure is now, as small talk is none of how things stand. `engine_fused` says the scores
    are the engine's fusion of the ranks the hits carry, so they can be counted again among each kind (deep
    recall fuses lists of its own, and keeps its scores). `restating` judges whether a later hit of a chat states
    again what an earlier one said (restated.py); without it the windows of a chat stay level.

    `lifts` (by entry id) is what the windows beside a match added to a hit's score (recall._smooth). Neither the
    band nor the order within it counts them; and for a question about the present with a derived claim among the
    first `k`, with the lifts or without, the first `k` are the hits that were there without them (in their order
    with them): a window its neighbours raised never keeps newer evidence out of them while a claim stands there.
    """
    top = len(hits) if k is None else k
    lifts = lifts or {}
    head, tail = hits[:top], hits[top:]
    # only episodes are lifted: with no claim among the hits, none can be among the first k either way
    if lifts and tail and reading.orientation == "present" and any(h.entry.kind in DERIVED for h in hits):
        unlifted = {h.entry.id for h in heapq.nlargest(top, hits, key=lambda h: _unlifted(h, lifts))}
        first = unlifted | {h.entry.id for h in head}
        if any(h.entry.kind in DERIVED for h in hits if h.entry.id in first):
            head = [h for h in hits if h.entry.id in unlifted]
            tail = [h for h in hits if h.entry.id not in unlifted]
    moved, reasons = _in_band(head, reading, currency, figure, engine_fused, restating, lifts)
    moved, sourced = _as_evidence(moved)
    moved, outdated = _outdated(moved, reading.orientation == "present")
    for entry_id, why in [*sourced.items(), *outdated.items()]:
        reasons.setdefault(entry_id, []).append(why)
    return moved + tail, reasons


def _unlifted(hit: ScoredEntry, lifts: Mapping[str, float]) -> float:
    """A hit's score less what the windows beside a match added to it (`lifts`, by entry id)."""
    return hit.score - lifts.get(hit.entry.id, 0.0)


def among_own_kind(hits: list[ScoredEntry], rrf_k: int, scores: list[float] | None = None) -> list[float]:
    """Each hit's score with its fusion counted again from its ranks among hits of its own kind: episodes among
    episodes, derived claims among derived claims; boosts scale with it.

    Facts are short and distilled, so they take the first ranks of both searches; counted among everything, they
    push the episodes they came from down both lists, and reciprocal rank fusion (steep at a small k) then puts
    the evidence about the question out of the band. A hit's own rank in a search is its rank there less the hits
    of the other kind ranked above it among these hits (the top k): exact when those are all here. A hit without
    ranks (a search that did not ask for them, or the second hop's, ranked in another search) keeps its score.
    `scores` are the hits' scores to count (their own when None; recall passes them less their lifts).
    """
    base = [h.score for h in hits] if scores is None else scores
    has_ranks = [h.dense_rank is not None or h.sparse_rank is not None for h in hits]
    if not any(has_ranks):
        return base
    if not all(has_ranks):  # hits without ranks in these searches (the second hop's) keep their scores
        counted = iter(among_own_kind([h for h, r in zip(hits, has_ranks, strict=True) if r], rrf_k,
                                      [b for b, r in zip(base, has_ranks, strict=True) if r]))
        return [next(counted) if r else b for r, b in zip(has_ranks, base, strict=True)]
    derived = [h.entry.kind in DERIVED for h in hits]
    # per search and kind, the sorted ranks of the hits of that kind found there
    ranks = {(search, kind): sorted(rank for h, d in zip(hits, derived, strict=True) if d is kind
                                    and (rank := (h.dense_rank, h.sparse_rank)[search]) is not None)
             for search in (0, 1) for kind in (False, True)}
    out = []
    for hit, kind, score in zip(hits, derived, base, strict=True):
        everyone = own = 0.0
        for search, rank in enumerate((hit.dense_rank, hit.sparse_rank)):
            if rank is not None:
                everyone += rrf(rank, rrf_k)
                own += rrf(rank - bisect.bisect_left(ranks[search, not kind], rank), rrf_k)
        out.append(score * own / everyone)
    return out


def _chats(when: dict[int, datetime]) -> tuple[dict[int, int], int]:
    """Each hit's chat, counted from the oldest (hits less than `SAME_CHAT` after the one before are of its chat),
    and how many chats there are."""
    chat: dict[int, int] = {}
    count, last = 0, None
    for i in sorted(when, key=when.__getitem__):
        if last is None or when[i] - last >= SAME_CHAT:
            count += 1
        chat[i], last = count - 1, when[i]
    return chat, count


def _steps(hits: list[ScoredEntry], chat: dict[int, int], restating: Restating | None
           ) -> tuple[dict[int, tuple[int, int]], dict[int, Restatement]]:
    """Each hit's step within its chat and how many steps its chat has: a window that states again what an earlier
    window of the chat said (a correction, a count reported again, a date moved: restated.py) is a step after every
    window said before it about that thing (the one it restates, and what restated or was restated by that one:
    "28 tickets" and then "down to 24" both restating "30 open tickets" put 24 last); the chat's other windows stay
    on its first step, level. Also the restatement that gave each hit its step."""
    members: dict[int, list[int]] = {}
    for i in sorted(chat, key=lambda i: (hits[i].entry.occurred_at, hits[i].entry.id)):
        members.setdefault(chat[i], []).append(i)
    step: dict[int, int] = {}
    because: dict[int, Restatement] = {}
    thread: dict[int, list[int]] = {}  # the windows said about one thing, shared by each of them
    for of_chat in members.values():
        for n, i in enumerate(of_chat):
            step[i], thread[i] = 0, [i]
            if restating is None or hits[i].entry.kind != "episodic":
                continue
            for j in of_chat[:n]:
                if hits[j].entry.kind != "episodic" or i in thread[j]:
                    continue
                again = restating.restates(hits[i], hits[j])
                if again is None:
                    continue
                after = max(step[m] for m in thread[j]) + 1
                if after > step[i]:
                    step[i], because[i] = after, again
                joined = thread[i] + [m for m in thread[j] if m not in thread[i]]
                for m in joined:
                    thread[m] = joined
    last = {c: max(step[i] for i in of_chat) for c, of_chat in members.items()}
    return {i: (step[i], last[chat[i]] + 1) for i in step}, because


def reorders(reading: Reading, k: int) -> bool:
    """Whether the band may reorder `k` hits for this question: not one about a past event, and not a single hit."""
    return reading.orientation != "event" and k > 1


def _in_band(hits: list[ScoredEntry], reading: Reading, currency: Currency, figure: figures.Asked | None,
             engine_fused: bool, restating: Restating | None, lifts: Mapping[str, float]
             ) -> tuple[list[ScoredEntry], dict[str, list[str]]]:
    """The band's hits reordered for the time asked about (derived claims below newer evidence), in its places;
    relevance is measured without the scores' `lifts`."""
    if not reorders(reading, len(hits)):
        return hits, {}
    unlifted = [_unlifted(h, lifts) for h in hits]
    scores = among_own_kind(hits, currency.rrf_k, unlifted) if engine_fused else unlifted
    episodes = [s for h, s in zip(hits, scores, strict=True) if h.entry.kind == "episodic"] or scores
    best = max(episodes) or 1.0
    relevance = [s / best for s in scores]
    band = [i for i, r in enumerate(relevance) if r >= 1.0 - currency.band]
    if len(band) < 2:
        return hits, {}
    newer_first = reading.orientation == "present"
    tense_weight = currency.weight if currency.tense_weight is None else currency.tense_weight
    weight = currency.weight if reading.explicit or not newer_first else tense_weight
    chatter = {i for i in band if small_talk(hits[i].entry)}
    figureless = set() if figure is None else {
        i for i in band if i not in chatter and not figures.stated(hits[i].entry, figure.named)}
    chatter |= figureless
    chat, chats = _chats({i: hits[i].entry.occurred_at for i in band if i not in chatter})
    step, restated = _steps(hits, chat, restating)

    def gain(i: int) -> float:
        # All of the weight for the newest chat (the oldest, for an earlier state), a share for each chat it is
        # newer than: windows of one chat stay level, and relevance alone orders them, unless one states again what
        # an earlier one said, which then takes its chat's share and the earlier one a part of it (the newest of s
        # steps all, the one before (s - 1)/s); small talk gains nothing, so evidence of the band's oldest chat
        # still gains more than small talk does.
        if i in chatter:
            return 0.0
        at, of = step[i]
        n, at = (chat[i], at) if newer_first else (chats - 1 - chat[i], of - 1 - at)
        return weight * (n + (at + 1) / of) / chats

    moved = [hits[i] for i in sorted(band, key=lambda i: relevance[i] + gain(i), reverse=True)]
    reasons: dict[str, list[str]] = {}
    if newer_first:
        moved, yielded = _yield_to_evidence(moved, {hits[i].entry.id for i in chatter}, restating)
        for entry_id, why in yielded.items():
            reasons.setdefault(entry_id, []).append(why)
    out = list(hits)
    for place, hit in zip(band, moved, strict=True):  # the band's places, given in the new order
        out[place] = hit
    if weight:
        which, asked = ("newer", "the present") if newer_first else ("older", "an earlier state")
        for place, hit in zip(band, moved, strict=True):
            was = hits.index(hit)
            why = (f"states no figure and the question asks for one ({figure.cue}), no gain for its age"
                   if figure and was in figureless else "small talk, no gain for its age" if was in chatter
                   else f"{which} evidence first (+{gain(was):.2f} of {weight:g}: chat {chat[was] + 1} of {chats} "
                        f"by date" + (f", step {step[was][0] + 1} of {step[was][1]} in it: {restated[was].why()}"
                                     if was in restated else "") + ")")
            reasons.setdefault(hit.entry.id, []).insert(0, (
                f"question about {asked} ({reading.cue}): relevance {relevance[was]:.2f} of the best episode's"
                f"{' (without the windows beside a match)' if lifts else ''}, "
                f"within the band ({1.0 - currency.band:.2f}); {why}: "
                f"{_day(hit.entry.occurred_at)}, rank {was + 1} -> {place + 1}"))
    return out, reasons
