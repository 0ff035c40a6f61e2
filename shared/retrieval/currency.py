"""Current by default: among the hits about the same thing, a question about the present gets the newest evidence
first, a question about an earlier state the older one, and a derived claim never stands above newer evidence.

No rule has to recognise the wording. "About the same thing" is measured, not parsed: a hit belongs to the band
when its dense similarity to the query is within `band` of the best-matching episode's (the evidence; a fact is
short and distilled, so it would otherwise set a bar no rambling episode reaches). Within the band, hits trade
places: each keeps its relevance and gains up to `weight` for being newer (older, for an earlier state), the gain
halving with every `half_life_days` it is older than the newest of the band, so windows of one chat, minutes
apart, are ordered by relevance alone. Hits
outside the band keep their places, so a question about something that never changed is answered as before, and
only the hits relevance already put in the top k trade places: time orders what relevance picked.

Derived claims yield to evidence: a fact ranks below every in-band episode newer than the statement it was
read from, and a profile (whose lines have many ages) below every in-band episode, for a question about now.
A question about a past event ("when did she move?") is left to relevance alone.
"""
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from shared.retrieval.tense import Reading
from shared.store import ScoredEntry

DERIVED = ("fact", "profile")


@dataclass(frozen=True)
class Currency:
    """How much the band reaches and how much newer counts, both in units of dense cosine similarity."""

    band: float
    weight: float
    half_life_days: float = 30.0


def _similarities(hits: list[ScoredEntry], query: list[float]) -> list[float]:
    q = np.asarray(query, dtype=np.float32)
    q /= float(np.linalg.norm(q)) or 1.0
    out = []
    for hit in hits:
        v = np.asarray(hit.vector or [], dtype=np.float32)
        out.append(float(v @ q / (float(np.linalg.norm(v)) or 1.0)) if v.size == q.size else float("-inf"))
    return out


def _day(when: datetime) -> str:
    return when.date().isoformat()


def _yield_to_evidence(order: list[ScoredEntry]) -> tuple[list[ScoredEntry], dict[str, str]]:
    """Move each derived claim below the newer evidence (episodes) that follows it; profiles below all evidence."""
    reasons: dict[str, str] = {}
    out = list(order)
    for claim in [h for h in order if h.entry.kind in DERIVED]:
        i = out.index(claim)
        profile = claim.entry.kind == "profile"
        later = [j for j in range(i + 1, len(out)) if out[j].entry.kind == "episodic"
                 and (profile or out[j].entry.occurred_at > claim.entry.occurred_at)]
        if later:
            last = later[-1]
            evidence = out[last].entry
            out.insert(last, out.pop(i))
            reasons[claim.entry.id] = (
                f"derived claim ({claim.entry.kind}) placed below evidence about the same question"
                + ("" if profile else f" newer than its statement ({_day(claim.entry.occurred_at)} < "
                                      f"{_day(evidence.occurred_at)}, entry {evidence.id})"))
    return out, reasons


def _outdated(hits: list[ScoredEntry], present: bool) -> tuple[list[ScoredEntry], dict[str, str]]:
    """Facts the consolidator marked possibly outdated: said so, and for a question about now placed right below
    the newer evidence that outdates them when it is among the hits."""
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


def rerank(hits: list[ScoredEntry], query: list[float], reading: Reading, currency: Currency,
           k: int | None = None) -> tuple[list[ScoredEntry], dict[str, list[str]]]:
    """The hits in their order for the time the question asks about, and why each one moved.

    Only the first `k` hits trade places (all when None): relevance picks what is returned, time orders it.
    """
    top = len(hits) if k is None else k
    moved_hits, reasons = _in_band(hits[:top], query, reading, currency)
    moved_hits += hits[top:]
    moved_hits, outdated = _outdated(moved_hits, reading.orientation == "present")
    for entry_id, why in outdated.items():
        reasons.setdefault(entry_id, []).append(why)
    return moved_hits, reasons


def _in_band(hits: list[ScoredEntry], query: list[float], reading: Reading,
             currency: Currency) -> tuple[list[ScoredEntry], dict[str, list[str]]]:
    if reading.orientation == "event" or len(hits) < 2 or not (currency.band or currency.weight):
        return hits, {}
    similarity = _similarities(hits, query)
    evidence = [s for s, h in zip(similarity, hits, strict=True) if h.entry.kind == "episodic"]
    best = max(evidence or similarity)
    band = [i for i, s in enumerate(similarity) if s >= best - currency.band]
    if len(band) < 2:
        return hits, {}
    newest = max(hits[i].entry.occurred_at for i in band)
    newer_first = reading.orientation == "present"
    half_life_s = currency.half_life_days * 86_400

    def score(i: int) -> float:
        # 1 for the newest, halving with every half-life older: hits minutes apart (one chat) stay level, and
        # relevance alone orders them; months apart, the newer gains the full weight.
        fresh = 0.5 ** ((newest - hits[i].entry.occurred_at).total_seconds() / half_life_s) if half_life_s else 1.0
        return similarity[i] + currency.weight * (fresh if newer_first else 1.0 - fresh)

    ranked = sorted(band, key=score, reverse=True)
    reasons: dict[str, list[str]] = {}
    moved = [hits[i] for i in ranked]
    if newer_first:
        moved, yielded = _yield_to_evidence(moved)
        for entry_id, why in yielded.items():
            reasons.setdefault(entry_id, []).append(why)
    out = list(hits)
    for place, hit in zip(band, moved, strict=True):  # the band's places, given in the new order
        out[place] = hit
    which = "newer" if newer_first else "older"
    asked = "the present" if newer_first else "an earlier state"
    for place, hit in zip(band, moved, strict=True):
        was = hits.index(hit)
        note = (f"question about {asked} ({reading.cue}): within {currency.band:g} of the best match "
                f"(similarity {similarity[was]:.3f}, best {best:.3f}), {which} evidence first; "
                f"{_day(hit.entry.occurred_at)}, rank {was + 1} -> {place + 1}")
        reasons.setdefault(hit.entry.id, []).insert(0, note)
    return out, reasons
