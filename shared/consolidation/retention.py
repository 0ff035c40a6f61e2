"""Retention: which entries have stopped earning their place, decided from importance, age and use.

An entry's retention is its importance, halved every `half_life_days` of age, plus a bonus for use (recall hits,
recorded by the retrievers). Age counts on the owner's own clock: from the entry's time (or its last use, if
later) to the owner's newest entry, so a person who comes back after a year finds their memory as they left it,
while one who talks every day sees old small talk fade. Facts, profiles and durable episodes (preferences, plans
and commitments, personal facts) do not decay with age alone.

An active entry goes when its retention falls below `min_score`, when it is older than the tenant's TTL
(wall-clock, for every kind: a compliance limit), or when the owner holds more than `max_entries` (the lowest
retention first). Entries merged into an entry that goes, go with it. Superseded facts stay: they are history.
"""
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.consolidation import importance
from shared.store import MemoryEntry

USE_BONUS = 0.05      # per recall hit
MAX_USE_BONUS = 0.3


@dataclass(frozen=True)
class Policy:
    """The retention settings that apply to one tenant."""

    half_life_days: float
    min_score: float
    ttl_days: float | None = None
    max_entries: int | None = None


def retention(entry: MemoryEntry, reference: datetime, half_life_days: float) -> float:
    """Importance decayed by age on the owner's clock (not for durable entries), plus a bonus for use."""
    bonus = min(MAX_USE_BONUS, USE_BONUS * entry.access_count)
    if importance.durable(entry):
        return entry.importance + bonus
    since = max(entry.occurred_at, entry.last_accessed_at or entry.occurred_at)
    age_days = max(0.0, (reference - since).total_seconds() / 86_400)
    return float(entry.importance * 0.5 ** (age_days / half_life_days) + bonus)


def to_forget(entries: list[MemoryEntry], policy: Policy, now: datetime) -> dict[str, str]:
    """The entries of one owner to forget, each with its reason (`low_retention`, `ttl`, `cap`)."""
    if not entries:
        return {}
    reference = max(e.occurred_at for e in entries)
    gone: dict[str, str] = {}
    if policy.ttl_days is not None:
        cutoff = now - timedelta(days=policy.ttl_days)
        gone.update({e.id: "ttl" for e in entries if e.occurred_at < cutoff})
    active = [e for e in entries if e.active and e.kind != "profile" and e.id not in gone]
    best: dict[str, float] = {}  # a keeper is worth its best copy: a recent restatement keeps an old keeper
    for entry in entries:
        score = retention(entry, reference, policy.half_life_days)
        key = entry.merged_into or entry.id
        best[key] = max(best.get(key, 0.0), score)
    scored = sorted(((best[e.id], e.id) for e in active), reverse=True)
    gone.update({entry_id: "low_retention" for score, entry_id in scored if score < policy.min_score})
    if policy.max_entries is not None:
        left = [entry_id for _, entry_id in scored if entry_id not in gone]
        gone.update({entry_id: "cap" for entry_id in left[policy.max_entries:]})
    for entry in entries:  # what was merged into an entry that goes for its worth goes with it; a TTL is per entry
        reason = gone.get(entry.merged_into or "")
        if reason in ("low_retention", "cap") and entry.id not in gone:
            gone[entry.id] = reason
    return gone
