"""Profile: one `kind=profile` entry per user gathering the user's current facts and preferences.

Built from the active facts that no newer evidence may have outdated (superseded and possibly outdated ones are
history) and that are not endings ("broke up with Rafael": what stopped, not what holds), so it is rewritten exactly
when they, or the newest evidence it took into account, change. Its dense vector is the normalised mean of those
facts' vectors (no model needed) and its text says "as of" the newest evidence of the user it took into account
(episodes included), not the newest fact it happened to extract, nor the time of the run: the profile is a pure
function of the stored entries.
"""
from datetime import datetime

import numpy as np

from shared.compress.facts.changes import ending
from shared.embedding import Bm25Encoder
from shared.store import MemoryEntry, StoredEntry, Vectors, entry_id
from shared.text import scripts

# Where a kind of fact sits in a profile: who the person is first, then people, then habits and plans.
_ORDER = ("lives_in", "from", "works_at", "occupation", "studies", "partner", "family", "pet", "diet", "allergy",
          "birthday", "favourite", "preference", "plan")
MAX_KEYWORDS = 24


def profile_id(tenant: str, user_id: str) -> str:
    """The deterministic id of a user's profile."""
    return entry_id(tenant, "", [user_id], f"profile\x1f{user_id}")


def current(fact: MemoryEntry) -> bool:
    """Whether a fact is one of the profile's lines: of a slot (by a rule, or put in one by the model), not marked
    possibly outdated, and not an ending ("broke up with Rafael": what stopped, not what holds)."""
    return ((fact.attribute is not None or fact.slot_by_model) and fact.outdated_by is None
            and not ending(fact.attribute, fact.value))


def _rank(fact: MemoryEntry) -> tuple[int, str]:
    family = (fact.attribute or "").split(":", 1)[0]
    return (_ORDER.index(family) if family in _ORDER else len(_ORDER)), fact.attribute or ""


def render(user_id: str, facts: list[MemoryEntry], as_of: datetime | None = None) -> str:
    """The profile's text: per person (most facts first), one current statement per line with the date it was
    stated, the whole dated by `as_of` (the newest evidence taken into account; the newest fact when not given)."""
    by_subject: dict[str, list[MemoryEntry]] = {}
    for fact in facts:
        by_subject.setdefault(fact.subject or user_id, []).append(fact)
    newest = max([f.occurred_at for f in facts] + ([as_of] if as_of else []))
    chinese = sum(1 for f in facts if any(scripts.is_han(c) for c in f.text)) * 2 > len(facts)
    lines = []
    for subject, items in sorted(by_subject.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if chinese:
            lines.append(f"{subject}的档案（截至{newest.year}年{newest.month}月{newest.day}日）：")
        else:
            lines.append(f"Profile of {subject} (as of {newest.day} {newest.strftime('%B %Y')}):")
        # Each line keeps the date it was stated: a profile says how old each of its claims is.
        lines += [f"- {f.text}" for f in sorted(items, key=_rank)]
    return "\n".join(lines)


def _union(lists: list[list[str]], limit: int | None = None) -> list[str]:
    out = list(dict.fromkeys(item for items in lists for item in items))
    return out[:limit] if limit else out


def build(tenant: str, user_id: str, facts: list[tuple[MemoryEntry, list[float]]], sparse: Bm25Encoder,
          existing: MemoryEntry | None, now: datetime, as_of: datetime | None = None) -> StoredEntry | None:
    """The user's profile from their current facts (with dense vectors), as of the newest evidence taken into
    account; None when it would not change."""
    entries = sorted((f for f, _ in facts), key=lambda f: (f.occurred_at, f.id))
    text = render(user_id, entries, as_of)
    sources = _union([f.source_turn_ids for f in entries])
    if existing is not None and existing.text == text and existing.source_turn_ids == sources:
        return None
    mean = np.mean(np.asarray([d for _, d in facts if d], dtype=np.float32), axis=0)
    norm = float(np.linalg.norm(mean)) or 1.0
    newest = entries[-1]
    entry = MemoryEntry(
        id=profile_id(tenant, user_id), tenant_id=tenant, user_id=user_id, conversation_id=newest.conversation_id,
        kind="profile", text=text, keywords=_union([f.keywords for f in entries], MAX_KEYWORDS),
        persons=_union([f.persons for f in entries]), entities=_union([f.entities for f in entries]),
        occurred_at=max([newest.occurred_at] + ([as_of] if as_of else [])),
        created_at=existing.created_at if existing else now, updated_at=now,
        source_turn_ids=sources, importance=1.0)
    return StoredEntry(entry=entry, vectors=Vectors(dense=[float(x) / norm for x in mean],
                                                    sparse=sparse.document(text)))
