"""English rules for the speaker's household: pets, partner and family members, each with a name."""
from shared.compress.facts.fact import Fact, Hit, Said
from shared.compress.facts.life import ADV, ME
from shared.compress.facts.phrases import PERSON_NAME, clean_name
from shared.compress.facts.vocabulary import NOT_NAMES, SPECIES
from shared.text import patterns

_PET_WORDS = "|".join(sorted(map(patterns.escape, SPECIES), key=len, reverse=True))
_PET_ADJ = (r"(?:(?:new|little|sweet|cute|rescue|baby|young|big|small|adorable|tiny|beautiful|fluffy|black|white|"
            r"brown|orange|gr[ae]y) ){0,8}")
_NAME = r"(?P<name>" + PERSON_NAME + ")"
# Words that may follow "I have a dog" when the dog is the pet itself, not "a dog walker" or "a dog bed".
_PET_END = (r"(?=\s*+(?:$|[.,!;:)]|[-–—]|(?:and|who|that|too|now|at|named|called|as well|last|yesterday|today|this|"
            r"recently|from|earlier|on|in|for|since|a few|two|three|over)\b))")
_HAVE_PET = patterns.compile(
    r"\b(?:[Ii]|[Ww]e)(?:'ve| have)? " + ADV + r"(?:have|got|adopted|rescued|bought|have got) (?:a|an|another) "
    + _PET_ADJ + r"(?P<species>" + _PET_WORDS + r")(?: (?:named|called) " + _NAME + ")?" + _PET_END)
_MY_PET = patterns.compile(
    r"\b(?:[Mm]y|[Oo]ur) " + _PET_ADJ + r"(?P<species>" + _PET_WORDS + r")(?:'s name is| is (?:named|called)|)\s"
    + _NAME)
_PARTNER = patterns.compile(
    r"\b[Mm]y (?P<rel>wife|husband|girlfriend|boyfriend|partner|fianc[ée]e?|spouse)(?:'s name is| is (?:named|called))?"
    r" " + _NAME)
_COUPLE = patterns.compile(ME + r"(?:'m| am| got) " + ADV + r"(?:happily )?(?P<rel>married|engaged|dating)(?: to)? "
                           + _NAME)
_FAMILY = patterns.compile(
    r"\b[Mm]y (?:(?:little|older|younger|big|baby|twin|eldest|oldest|youngest|elder|kid) )?"
    r"(?P<rel>sister|brother|son|daughter|mom|mum|mother|dad|father)(?:'s name is| is (?:named|called))? " + _NAME)
_RELATIONS = {"mom": "mother", "mum": "mother", "dad": "father"}


def _name(match: patterns.Match) -> str | None:
    raw = match.group("name")
    name = clean_name(raw) if raw else None
    return name if name and name.split()[0] not in NOT_NAMES else None


def pets(sentence: str, said: Said) -> list[Hit]:
    """Pets: "I have a dog named Rex", "we adopted a cat", "my cat's name is Luna", "my dog Rex"."""
    hits = []
    for pattern in (_HAVE_PET, _MY_PET):
        for match in pattern.finditer(sentence):
            species = SPECIES[match.group("species").lower()]
            name = _name(match) if match.group("name") else None
            if pattern is _MY_PET and name is None:
                continue  # "my dog" alone says nothing about having one now
            statement = f"{said.speaker} has a {species}" + (f" named {name}" if name else "")
            hits.append(Hit(Fact(f"pet:{species}", name or species, statement, entities=(name,) if name else ()),
                            match.start(), match.end()))
    return hits


def partner(sentence: str, said: Said) -> list[Hit]:
    """Partner: "my wife Jo", "my boyfriend's name is Sam", "I'm married to Alex", "I'm dating Kim"."""
    hits = []
    for match in _PARTNER.finditer(sentence):
        name = _name(match)
        if name:
            rel = match.group("rel").lower()
            hits.append(Hit(Fact("partner", name, f"{said.speaker}'s {rel} is {name}", (name,), (name,)),
                            match.start(), match.end()))
    for match in _COUPLE.finditer(sentence):
        name = _name(match)
        if name:
            rel = match.group("rel")
            verb = "is dating" if rel == "dating" else f"is {rel} to"
            hits.append(Hit(Fact("partner", name, f"{said.speaker} {verb} {name}", (name,), (name,)),
                            match.start(), match.end()))
    return hits


def family(sentence: str, said: Said) -> list[Hit]:
    """Family: "my sister Maria", "my son's name is Leo", "my mom Linda" (keyed by name: siblings come in twos)."""
    hits = []
    for match in _FAMILY.finditer(sentence):
        name = _name(match)
        if name:
            rel = match.group("rel").lower()
            rel = _RELATIONS.get(rel, rel)
            hits.append(Hit(Fact(f"family:{rel}:{name.casefold()}", name, f"{said.speaker}'s {rel} is {name}",
                                 (name,), (name,)), match.start(), match.end()))
    return hits
