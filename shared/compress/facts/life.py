"""English rules for where the speaker lives and comes from, where and as what they work, and what they study."""
from collections.abc import Iterator

from shared.compress.facts.fact import Fact, Hit, Said
from shared.compress.facts.phrases import CAP_RUN, LETTER, NOT_OBJECT_START, clean_name
from shared.compress.facts.vocabulary import (
    LANGUAGES,
    OCCUPATION_MODIFIERS,
    OCCUPATIONS,
    STUDENT_OCCUPATIONS,
    SUBJECTS,
)
from shared.text import patterns

ME = r"\b[Ii]"  # the speaker as subject; chat often writes a lower-case "i"
# Adverbs before the verb ("I've just recently moved to"): a few at most, so a rule reads a bounded stretch.
ADV = r"(?:(?:just|recently|finally|now|actually|currently|also|already|officially|still) ){0,8}"
# Spaces before a name are taken whole (possessive: a name never starts with one).
_PLACE = r"(?P<the>the\s++)?(?P<place>" + CAP_RUN + ")"
_ORG = r"(?P<the>the\s++)?(?P<org>" + CAP_RUN + ")"
_LIVES = [
    patterns.compile(ME + r"(?:'ve| have)? " + ADV + r"(?:live in|moved (?:back )?to|relocated to)\s++" + _PLACE),
    patterns.compile(ME + r"(?:'m| am) " + ADV + r"living in\s++" + _PLACE),
    patterns.compile(ME + r"(?:'ve| have) been living in\s++" + _PLACE),
    patterns.compile(r"\b[Ww]e(?:'ve| have)? " + ADV + r"(?:live in|moved (?:back )?to|relocated to)\s++" + _PLACE),
]
_FROM = [
    patterns.compile(ME + r"(?:'m| am) (?:originally |actually |also ){0,8}from\s++" + _PLACE),
    patterns.compile(ME + r" (?:originally )?(?:come from|grew up in|was born(?: and raised)? in|was raised in)\s++"
                     + _PLACE),
    patterns.compile(r"\b[Mm]y (?:home country|hometown|home town|homeland)(?:,| is| of)?\s++" + _PLACE),
]
_WORKS = [
    patterns.compile(ME + r"(?: " + ADV + r"work|(?:'m| am) " + ADV + r"working|(?:'ve| have) been working) "
                     r"(?:at|for)\s++" + _ORG),
    patterns.compile(ME + r" " + ADV + r"(?:started|began) (?:(?:a |my )?(?:new )?(?:job|position|role|internship) )?"
                     r"at\s++" + _ORG),
    patterns.compile(ME + r"(?:'ve| have)? " + ADV + r"(?:got|gotten|landed|took|accepted|started) "
                     r"(?:a |an |the |my )?(?:new )?(?:full-time |part-time )?(?:job|position|role|internship) "
                     r"(?:at|with)\s++" + _ORG),
    patterns.compile(ME + r" " + ADV + r"joined\s++" + _ORG + r" as an? "),
]
_NOT_EMPLOYERS = frozenset({"Home", "Work", "School", "Night", "Church"})
_OCCUPATION_LEADS = [
    patterns.compile(ME + r"(?:'m| am) " + ADV + r"an? "),
    patterns.compile(ME + r"(?: " + ADV + r"work|(?:'m| am) " + ADV + r"working) as an? "),
    patterns.compile(ME + r"(?:'ve| have)? " + ADV + r"(?:became|become) an? "),
    patterns.compile(ME + r"(?:'ve| have) been an? "),
    patterns.compile(r"\b[Mm]y (?:job|profession|occupation) is (?:being )?an? "),
    patterns.compile(ME + r" " + ADV + r"joined\s++" + CAP_RUN + r" as an? "),
]
# What may follow an occupation without turning it into something else ("a teacher's aide", "a student of life").
_AFTER_OCCUPATION = frozenset("""
at in for and with by who from since now too so but because here there myself currently these on specializing
working helping today as or
""".split())  # noqa: SIM905
_STUDY_LEADS = [
    patterns.compile(ME + r"(?:'m| am) " + ADV + r"(?:studying|majoring in) "),
    patterns.compile(ME + r" " + ADV + r"(?:study|major in) "),
]
_MAJOR = patterns.compile(ME + r"(?:'m| am) an? (?P<subject>[a-z]++(?: [a-z]++)?) major\b")
_AT_SCHOOL = patterns.compile(r"\s+at\s+(?P<org>" + CAP_RUN + ")")
_AFTER_SUBJECT = frozenset({"at", "in", "and", "for", "because", "now", "this", "next", "right", "since", "these",
                            "with", "so", "but"})
_TOKEN = patterns.compile(rf"[{LETTER}][{LETTER}'-]*+|\S")
_NOT_REALLY = patterns.compile(r"\s*(?:at heart|in spirit|wannabe)")


def _place_hits(found: list[patterns.Pattern], sentence: str) -> Iterator[tuple[patterns.Match, str, str]]:
    for pattern in found:
        for match in pattern.finditer(sentence):
            place = clean_name(match.group("place"))
            if place:
                yield match, place, ("the " if match.group("the") else "") + place


def lives_in(sentence: str, said: Said) -> list[Hit]:
    """Where the speaker lives: "I live in Porto", "I've just moved to Lisbon", "we moved to Berlin"."""
    return [Hit(Fact("lives_in", place, f"{said.speaker} lives in {shown}", entities=(place,)), m.start(), m.end())
            for m, place, shown in _place_hits(_LIVES, sentence)]


def origin(sentence: str, said: Said) -> list[Hit]:
    """Origin: "I'm originally from Sweden", "I grew up in Ohio", "my home country, Sweden"."""
    return [Hit(Fact("from", place, f"{said.speaker} is from {shown}", entities=(place,)), m.start(), m.end())
            for m, place, shown in _place_hits(_FROM, sentence)]


def works_at(sentence: str, said: Said) -> list[Hit]:
    """Employer: "I work at Google", "I got a job at Acme", "I joined Stripe as an engineer"."""
    hits = []
    for pattern in _WORKS:
        for match in pattern.finditer(sentence):
            org = clean_name(match.group("org"))
            if org and org not in _NOT_EMPLOYERS:
                shown = ("the " if match.group("the") else "") + org
                hits.append(Hit(Fact("works_at", org, f"{said.speaker} works at {shown}", entities=(org,)),
                                match.start(), match.end()))
    return hits


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _occupation(rest: str) -> tuple[str, int] | None:
    """The whitelisted occupation `rest` starts with (after "a"/"an") and how many characters it spans."""
    tokens = list(_TOKEN.finditer(rest[:120]))
    words = [t.group(0).lower() for t in tokens]
    i = 0
    while i < len(words) and words[i] in OCCUPATION_MODIFIERS:
        i += 1
    for size in (4, 3, 2, 1):
        entry = " ".join(words[i:i + size])
        if len(words) >= i + size and entry in OCCUPATIONS:
            after = words[i + size] if len(words) > i + size else ""
            if after and after[0].isalpha() and after not in _AFTER_OCCUPATION:
                return None
            if _NOT_REALLY.match(rest, tokens[i + size - 1].end()):
                return None
            return " ".join(words[:i + size]), tokens[i + size - 1].end()
    return None


def occupation(sentence: str, said: Said) -> list[Hit]:
    """Occupation: "I'm a nurse", "I work as a software developer", "I became a teacher" (whitelisted only)."""
    hits = []
    for lead in _OCCUPATION_LEADS:
        for match in lead.finditer(sentence):
            found = _occupation(sentence[match.end():])
            if found is None:
                continue
            value, length = found
            verb = "is" if value in STUDENT_OCCUPATIONS or value.startswith("stay-at-home") else "works as"
            hits.append(Hit(Fact("occupation", value, f"{said.speaker} {verb} {_article(value)} {value}"),
                            match.start(), match.end() + length))
    return hits


def _subject(rest: str) -> tuple[str, int] | None:
    """The study subject `rest` starts with ("computer science", "Japanese") and its length in characters."""
    tokens = list(_TOKEN.finditer(rest[:80]))[:5]
    words = [t.group(0) for t in tokens]
    for size in (3, 2, 1):
        if len(words) < size:
            continue
        phrase = words[:size]
        lowers = [w.lower() for w in phrase]
        if size >= 2 and " ".join(lowers[-2:]) in SUBJECTS:
            modifiers = phrase[:-2]
        elif lowers[-1] in SUBJECTS or (size == 1 and phrase[0] in LANGUAGES):
            modifiers = phrase[:-1]
        else:
            continue
        if not all(w.isalpha() and w.islower() and w not in NOT_OBJECT_START for w in modifiers):
            continue
        after = words[size].lower() if len(words) > size else ""
        if not after or not after[0].isalpha() or after in _AFTER_SUBJECT:
            return " ".join(phrase), tokens[size - 1].end()
    return None


def studies(sentence: str, said: Said) -> list[Hit]:
    """Subject studied: "I study law", "I'm studying design at Parsons", "I'm majoring in biology", "a math major"."""
    hits = []
    for lead in _STUDY_LEADS:
        for match in lead.finditer(sentence):
            found = _subject(sentence[match.end():])
            if found is None:
                continue
            subject, length = found
            end = match.end() + length
            value = subject
            entities: tuple[str, ...] = ()
            school = _AT_SCHOOL.match(sentence, end)
            name = clean_name(school.group("org")) if school else None
            if school and name:
                value, entities, end = f"{subject} at {name}", (name,), school.end()
            hits.append(Hit(Fact("studies", value, f"{said.speaker} studies {value}", entities=entities),
                            match.start(), end))
    for match in _MAJOR.finditer(sentence):
        subject = match.group("subject")
        if subject in SUBJECTS or subject.split()[-1] in SUBJECTS:
            hits.append(Hit(Fact("studies", subject, f"{said.speaker} studies {subject}"), match.start(), match.end()))
    return hits
