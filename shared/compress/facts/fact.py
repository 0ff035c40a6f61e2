"""What a rule finds in one sentence (a `Hit`), and how an attribute's object is normalised into its key."""
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from shared.text import patterns

_KEY_DROP = patterns.compile(r"[^\w\s-]")
# Plural-looking words that are not plurals ("news", "physics"): their key keeps the final s.
_NOT_PLURAL = frozenset("""
news series species physics mathematics politics gymnastics athletics aerobics economics clothes glasses shellfish
jeans pants lens bus gas yes this
""".split())  # noqa: SIM905

_IE_PLURALS = frozenset("""
movies cookies zombies selfies smoothies brownies pies ties rookies hoodies veggies goodies calories lies
""".split())  # noqa: SIM905


@dataclass(frozen=True)
class Said:
    """Who said a sentence, and when: all a rule needs besides the sentence itself."""

    speaker: str
    ts: datetime


@dataclass(frozen=True)
class Fact:
    """One statement about the speaker: the slot's attribute and value, and a sentence that says it."""

    attribute: str
    value: str
    statement: str                  # "Ana lives in Porto": self-contained, without the date it was stated
    persons: tuple[str, ...] = ()   # people the fact names besides its subject
    entities: tuple[str, ...] = ()  # names, places, companies in the value


@dataclass(frozen=True)
class Hit:
    """A fact and where in its sentence the matched words are (guards read the words before and after)."""

    fact: Fact
    start: int
    end: int


def singular(word: str) -> str:
    """A plural English noun as its singular, roughly ("peanuts" -> "peanut", "berries" -> "berry")."""
    lower = word.lower()
    if lower in _NOT_PLURAL or len(lower) <= 3 or not lower.endswith("s") or lower.endswith(("ss", "us", "is")):
        return word
    if lower.endswith("ies") and len(lower) > 4:
        return word[:-1] if lower in _IE_PLURALS else word[:-3] + "y"
    if lower.endswith(("ches", "shes", "xes", "oes")):
        return word[:-2]
    return word[:-1]


def object_key(text: str, *, plural: bool = False) -> str:
    """An object as it appears in an attribute: lower case, no article or punctuation ("The Beatles!" -> "beatles").

    Args:
        plural: fold the last word to its singular, so "peanuts" and "a peanut allergy" share one key.
    """
    words = _KEY_DROP.sub("", text.strip().casefold()).split()
    while words and words[0] in ("the", "a", "an"):
        words = words[1:]
    if plural and words and text.split()[-1][:1].islower():  # names keep their s ("Paris")
        words[-1] = singular(words[-1])
    return " ".join(words)


Rule = Callable[[str, Said], list[Hit]]


@dataclass(frozen=True)
class Reader:
    """How one language's turns are read: split into sentences, guarded, and matched against its rules."""

    sentences: Callable[[str], list[str]]
    is_question: Callable[[str], bool]
    blocked: Callable[[str, str], bool]  # (words before a hit, words after it) -> the hit is not a plain statement
    rules: tuple[Rule, ...]
