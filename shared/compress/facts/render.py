"""A fact becomes a memory draft: its statement dated, who and what it names, and how much it matters."""
from datetime import datetime

from engram_client.contract import Turn
from shared.compress.extract import STOPWORDS
from shared.compress.facts.fact import Fact
from shared.compress.facts.phrases import LETTER
from shared.compress.model import Draft, Slot
from shared.text import patterns, scripts

# Facts that stay true for years and answer many questions rank above tastes and plans.
_IMPORTANCE = {"allergy": 0.8, "diet": 0.8, "birthday": 0.8, "partner": 0.8, "family": 0.8, "lives_in": 0.8,
               "works_at": 0.8, "occupation": 0.8, "preference": 0.7, "favourite": 0.7, "pet": 0.7, "studies": 0.7,
               "from": 0.7, "plan": 0.75}
_VALUE_IS_A_VERDICT = frozenset({"preference", "allergy"})  # "likes", "allergic": what they name is in the key
_WORD = patterns.compile(rf"[{LETTER}0-9][{LETTER}0-9'-]*+|[\u4e00-\u9fff]++")
MAX_KEYWORDS = 8


_STATED = patterns.compile(r"\s*[（(][^()（）]*(?:stated|所述)[^()（）]*[)）]\s*$")


def without_stated(statement: str) -> str:
    """A stored fact's text without the suffix `stated` gave it."""
    return _STATED.sub("", statement)


def stated(ts: datetime, lang: str) -> str:
    """When a fact was said, as the statement's suffix: " (stated 2 September 2024)" / "（2024年9月2日所述）"."""
    if lang == "zh":
        return f"（{ts.year}年{ts.month}月{ts.day}日所述）"
    return f" (stated {ts.day} {ts.strftime('%B %Y')})"


def importance_of(attribute: str) -> float:
    """How much a fact of this attribute matters (facts that stay true for years and answer many questions most)."""
    return _IMPORTANCE.get(attribute.split(":", 1)[0], 0.7)


def keywords_of(fact: Fact) -> list[str]:
    """Search words of a fact: its attribute's words, and its value's unless the value is a verdict ("likes")."""
    base = fact.attribute.split(":", 1)[0]
    words = _WORD.findall(fact.attribute.replace("_", " "))
    # A verdict ("likes") is no search term, and a Chinese plan's value runs its date into its words ("6月去日本").
    if base not in _VALUE_IS_A_VERDICT and not (base == "plan" and any(scripts.is_han(c) for c in fact.value)):
        words += _WORD.findall(fact.value)
    out: dict[str, None] = {}
    for word in words:
        lower = word.lower()
        if (len(lower) >= 3 or scripts.is_han(lower[0])) and lower not in STOPWORDS and not lower.endswith("'s"):
            out.setdefault(lower, None)
    return list(out)[:MAX_KEYWORDS]


def draft(fact: Fact, turn: Turn, lang: str) -> Draft:
    """The draft of one fact stated in `turn`: kind "fact", the slot set, the turn its only source."""
    return Draft(
        kind="fact", text=fact.statement + stated(turn.ts, lang),
        persons=[turn.speaker, *(p for p in fact.persons if p != turn.speaker)],
        entities=list(dict.fromkeys(fact.entities)), keywords=keywords_of(fact), occurred_at=turn.ts,
        source_turn_ids=[turn.turn_id], importance=importance_of(fact.attribute),
        slot=Slot(subject=turn.speaker, attribute=fact.attribute, value=fact.value))


def verdict(attribute: str | None) -> bool:
    """Whether the attribute's value is a verdict on the object its key holds ("preference:sushi" = "likes")."""
    return (attribute or "").partition(":")[0] in _VALUE_IS_A_VERDICT


def named(attribute: str | None, value: str | None) -> str | None:
    """What a fact names, as a chat would: its value ("Lisbon"), or, when the value is a verdict ("likes",
    "allergic"), the object its attribute holds ("preference:altin gün" names "altin gün")."""
    thing = (attribute or "").partition(":")[2]
    return thing if verdict(attribute) and thing else value
