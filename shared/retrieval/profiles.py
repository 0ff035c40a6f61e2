"""A user's profile in recall: fetched by id beside the search, and put first when the query is about the user.

"About the user" is decided from the query: it names the person (first- or second-person words, as a product
asks on the user's behalf: "what do I like?", "where does the user live?", "我喜欢什么"; or the name of a person
the profile describes) and asks for what a profile holds (where someone lives or works, family and pets,
likes and dislikes, allergies and diet, birthdays, plans). "What did Ana think of the dance studio?" is not: an
episode answers it, and the profile would only crowd one out. A recall with hard filters never gets the
profile (it may not satisfy them).
"""
import logging
import re

from shared.consolidation.profile import profile_id
from shared.contract import RecallRequest
from shared.retrieval.plan import QueryPlan
from shared.store import MemoryEntry, Scope, ScoredEntry, Store

log = logging.getLogger("engram.retrieval")
_CUES = re.compile(
    r"\b(?:live[sd]?|living|moved?|home|hometown|from|work(?:s|ing)?|job|company|employer|occupation|profession|"
    r"stud(?:y|ies|ying)|school|university|college|major|pets?|dogs?|cats?|partner|wife|husband|girlfriend|"
    r"boyfriend|married|sisters?|brothers?|mother|father|mom|mum|dad|sons?|daughters?|family|likes|loves?|"
    r"(?:do|does|did|don't|doesn't)(?:\s+\w+){1,2}\s+like|"
    r"enjoys?|hates?|dislikes?|favou?rite|prefers?|hobby|hobbies|allerg(?:ic|y|ies)|diet|vegetarian|vegan|"
    r"birthday|born|plans?|planning|profile)\b|住|搬|工作|公司|职业|学校|大学|专业|宠物|狗|猫|老婆|老公|妻子|丈夫|"
    r"朋友|家人|喜欢|爱|讨厌|过敏|吃素|素食|生日|计划|打算|档案", re.IGNORECASE)
_ABOUT = re.compile(r"\b(?:i|me|my|mine|myself|you|your|yours|yourself|user|user's)\b|[我你]", re.IGNORECASE)
_SUBJECT = re.compile(r"^Profile of (.+) \(as of|^(.+)的档案（", re.MULTILINE)


async def of_user(store: Store, tenant: str, request: RecallRequest) -> MemoryEntry | None:
    """The profile of the request's user, if the request may get one and it exists."""
    if request.user_id is None or request.filters is not None:
        return None
    try:
        found = await store.get(Scope(tenant_id=tenant, user_id=request.user_id),
                                [profile_id(tenant, request.user_id)])
    except Exception as exc:  # the search answers the recall; a profile that cannot be read is left out
        log.warning("reading a profile failed (%s: %s); answering without it", type(exc).__name__, exc)
        return None
    return found[0] if found else None


def subjects(profile: MemoryEntry) -> list[str]:
    """The people a profile describes (its section headings)."""
    return [m.group(1) or m.group(2) for m in _SUBJECT.finditer(profile.text)]


def about_user(profile: MemoryEntry | None, query: str, query_plan: QueryPlan) -> MemoryEntry | None:
    """The profile, when the query asks what it holds about the person it describes; else None."""
    if profile is None or not _CUES.search(query):
        return None
    if _ABOUT.search(query):
        return profile
    words = {w.casefold() for w in re.findall(r"\w+", query)} | {n.casefold() for n in query_plan.names}
    return profile if any(p.casefold() in words or p in query for p in subjects(profile)) else None


def first(profile: MemoryEntry, hits: list[ScoredEntry]) -> list[ScoredEntry]:
    """The profile ahead of the hits (scored just above the best of them)."""
    top = max((h.score for h in hits), default=1.0)
    return [ScoredEntry(entry=profile, score=top + 1e-6), *(h for h in hits if h.entry.id != profile.id)]
