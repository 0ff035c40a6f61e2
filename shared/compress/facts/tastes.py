"""English rules for what the speaker likes and dislikes, is allergic to, eats, and when their birthday is."""
from datetime import datetime

from shared.compress import dates
from shared.compress.facts.fact import Fact, Hit, Said, object_key
from shared.compress.facts.life import ADV, ME
from shared.compress.facts.phrases import CAP_RUN, NOT_OBJECT_START, clean_name, object_phrase
from shared.compress.facts.vocabulary import ACTIVITIES, SUBJECTS
from shared.text import patterns

# Adverbs of degree, a few at most ("I really really love"), so a rule reads a bounded stretch.
_DEGREE = r"(?:(?:really|absolutely|totally|just|truly|also|still|genuinely|honestly|seriously|do|especially) ){0,8}"
_LIKES = [
    patterns.compile(ME + r" " + _DEGREE + r"(?:love|enjoy|adore|like) "),
    patterns.compile(ME + r"(?:'m| am) (?:(?:really|so|super|totally|very|big|also|quite|still) ){0,8}into "),
    patterns.compile(ME + r"(?:'m| am) (?:(?:also|really|such) ){0,8}(?:a |such a )?"
                     r"(?:(?:big|huge|great|massive|major) )?fan of "),
    patterns.compile(ME + r"(?:'ve| have) always (?:had a love for|loved|enjoyed) "),
    patterns.compile(ME + r"(?:'ve| have) (?:always )?been (?:(?:really|so|super) )?into "),
    patterns.compile(ME + r"(?:'m| am) (?:(?:really|so|super|very|also|truly|deeply) ){0,8}passionate about "),
]
_COMMON_PASSIONS = frozenset({"dance", "fashion", "travel", "music", "art", "sports", "nature", "food", "books"})
# "Dance is my passion": the object comes first and must be the whole subject.
_IS_MY = patterns.compile(r"^(?P<obj>[A-Za-z][A-Za-z' -]{1,40}?) (?:is|are) (?:really |truly )?my "
                          r"(?:(?:true|biggest|big|real) )?(?:passion|favou?rite (?:hobby|thing to do|pastime))\b")
_DISLIKES = [
    patterns.compile(ME + r" (?:(?:really|absolutely|just|totally|also|still|honestly) ){0,8}(?:hate|dislike|detest|"
                     r"can't stand|cannot stand) "),
    patterns.compile(ME + r" (?:don't|do not|no longer) (?:(?:really|much|particularly|even) )?(?:like|enjoy) "),
    patterns.compile(ME + r"(?:'m| am) (?:not|no longer) (?:a )?(?:(?:big|huge|great) )?fan of "),
    patterns.compile(ME + r"(?:'m| am) (?:not|no longer) (?:really )?into "),
]
_FAVOURITE_WHAT = (r"(?P<what>food|dish|meal|sport|colou?r|band|singer|artist|movie|film|show|book|novel|author|genre|"
                   r"season|animal|game|board game|hobby|drink|fruit|dessert|cuisine|city|country|holiday|song|"
                   r"musician|team|flower|snack|restaurant|writer|painter|activity|instrument|music|composer)")
_FAVOURITE_OF = r"(?:(?:absolute|all-time|new|current) ){0,8}favou?rite "
# "My favourite band is X", "my new favourite band of all time is X".
_FAVOURITE = patterns.compile(r"\b[Mm]y " + _FAVOURITE_OF + _FAVOURITE_WHAT
                              + r"(?: (?:of all time|ever|in the (?:whole )?world|by (?:far|miles)))? (?:is|has to be) "
                              r"(?:(?:now|still|definitely|officially) ){0,8}")
# "X is my favourite band (now)": the favourite first, the whole subject of the sentence: a name (every word
# capitalised, not a word that opens a clause: "Once Wet Leg is...", "Nothing is...") or a lower-case noun phrase.
# Anchored: one attempt. A word's characters are taken whole (possessive), as a space always comes next.
_FAVOURITE_FIRST = patterns.compile(r"^(?P<obj>[^\W\d_][\w'.&-]*+(?: [\w'.&-]++){0,2}?) (?:is|are) "
                                    r"(?:(?:still|now|officially|definitely|easily|honestly|also) ){0,8}my "
                                    + _FAVOURITE_OF + _FAVOURITE_WHAT + r"(?![\w'’])(?! (?:no more|any ?more)\b)")
_HEDGE = patterns.compile(r"(?:probably|maybe|perhaps|possibly|not|no longer|never)\b", patterns.IGNORECASE)
_NOT_A_FAVOURITE = NOT_OBJECT_START | frozenset("""
if unless whether maybe perhaps because since though although once pretend imagine say guess none
hypothetically apparently supposedly assuming suppose surely
""".split())  # noqa: SIM905
_FAVOURITE_NAME = patterns.compile(r"(?:The )?" + CAP_RUN)
# One slot per kind of favourite, however it is spelled.
_FAVOURITE_KINDS = {"color": "colour", "film": "movie", "novel": "book", "writer": "author"}
_ALLERGIC = patterns.compile(
    ME + r"(?:'m| am) (?P<neg>not |no longer )?(?:(?:also|very|really|so|super|severely|deathly|highly|extremely|"
    r"mildly|slightly|seriously|badly) ){0,8}allergic to ")
_ALLERGY = patterns.compile(
    ME + r"(?:'ve| have)(?: got)? (?:a |an )?(?:(?:severe|bad|mild|serious|slight|terrible|life-threatening) )?"
    r"(?P<obj>[a-z]++(?: [a-z]++)?) allergy\b")
_NOT_ALLERGENS = frozenset({"food", "seasonal", "skin", "weird", "little", "strange", "rare", "new", "terrible"})
_LIST_SPLIT = patterns.compile(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+")
_CLAUSE_END = patterns.compile(r"[.;:!?()\"“”…]|\s[-–—]\s")
_DIET_WORDS = (r"(?P<diet>vegetarian|vegan|pescatarian|pescetarian|gluten-free|gluten free|keto|halal|kosher|"
               r"plant-based)")
_DIET_END = (r"(?=\s*+(?:$|[.,!;:)]|[-–—]|(?:and|but|so|since|for|now|too|because|these|myself|lately|already|"
             r"again|nowadays|last|this|in|a|about|over|recently|years|ever|after|at|when|btw|lol|haha|though)\b))")
_DIETS = [
    patterns.compile(ME + r"(?:'m| am) " + ADV + r"(?:(?:strictly|fully|completely) )?(?:a )?" + _DIET_WORDS
                     + _DIET_END),
    patterns.compile(ME + r"(?:'ve| have) " + ADV + r"(?:gone|been|become) " + _DIET_WORDS + _DIET_END),
    patterns.compile(ME + r" " + ADV + r"(?:went|became|turned|eat|keep) " + _DIET_WORDS + _DIET_END),
    patterns.compile(ME + r"(?:'m| am|'ve| have)? " + ADV + r"(?:on|following|doing|eat|follow|switched to|went on|"
                     r"started|gone on|been on) (?:a|the) " + _DIET_WORDS + r" diet\b"),
]
_NO_MEAT = patterns.compile(ME + r" (?:don't|do not|no longer|stopped|quit|gave up) (?:eat|eating) (?:any )?meat"
                            + _DIET_END)
_DIET_VALUES = {"pescetarian": "pescatarian", "gluten free": "gluten-free", "plant-based": "vegan"}
_DIET_STATEMENTS = {"gluten-free": "eats gluten-free", "keto": "follows a keto diet", "halal": "eats halal",
                    "kosher": "keeps kosher"}
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
MONTH = r"(?:" + "|".join(MONTHS) + r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)"
DATE = (r"(?:(?P<m1>" + MONTH + r")\.? (?P<d1>\d{1,2})(?:st|nd|rd|th)?|(?:the )?(?P<d2>\d{1,2})(?:st|nd|rd|th)? "
        r"(?:of )?(?P<m2>" + MONTH + r"))(?:,? (?P<y>(?:19|20)\d\d))?\b")
_BIRTHDAY = patterns.compile(r"\b[Mm]y birthday(?: is| was|'s| falls)?(?: on)? " + DATE)
_BORN = patterns.compile(ME + r" was born on " + DATE)
_BIRTHDAY_RELATIVE = patterns.compile(r"\b[Mm]y birthday(?: is|'s| was) (?:on )?|"
                                      r"\b(?:[Tt]oday|[Tt]omorrow|[Yy]esterday) (?:is|was) my birthday\b|"
                                      r"\b[Ii]t's my birthday ")


def _preference(said: Said, obj: str, likes: bool, start: int, end: int, statement: str | None = None) -> Hit:
    value = "likes" if likes else "dislikes"
    return Hit(Fact(f"preference:{object_key(obj, plural=True)}", value, statement or f"{said.speaker} {value} {obj}"),
               start, end)


def _uncapitalised(obj: str) -> str:
    """A sentence-initial common noun in lower case ("Dance" -> "dance"); names keep their capital."""
    first, _, rest = obj.partition(" ")
    lower = first.lower()
    if lower in ACTIVITIES or lower in SUBJECTS or lower.endswith("ing") or lower in _COMMON_PASSIONS:
        return f"{lower} {rest}".strip()
    return obj


def preferences(sentence: str, said: Said) -> list[Hit]:
    """Likes and dislikes ("I love hiking", "I'm a fan of pottery", "I don't like sushi"), keyed by their object, and
    favourites ("my favourite band is Khruangbin"), keyed by their kind: a person has one favourite band at a time,
    so a new one replaces the old one, while liking one thing never replaces liking another."""
    hits = []
    for leads, likes in ((_LIKES, True), (_DISLIKES, False)):
        for pattern in leads:
            for match in pattern.finditer(sentence):
                obj = object_phrase(sentence[match.end():])
                if obj:
                    hits.append(_preference(said, obj, likes, match.start(), match.end() + len(obj)))
    for match in _IS_MY.finditer(sentence):
        obj = object_phrase(match.group("obj"))
        if obj and obj == match.group("obj").strip():
            hits.append(_preference(said, _uncapitalised(obj), True, match.start(), match.end()))
    for match in _FAVOURITE.finditer(sentence):
        rest = sentence[match.end():]
        if _HEDGE.match(rest):  # "my favourite band is probably Wet Leg", "... is not Wet Leg"
            continue
        name = _FAVOURITE_NAME.match(rest)
        obj = _named(name.group(0)) if name else object_phrase(rest)
        if obj:
            hits.append(_favourite(said, match.group("what"), obj, match.start(), match.end() + len(obj)))
    first = _FAVOURITE_FIRST.match(sentence)
    obj = _subject(first.group("obj")) if first else None
    if first and obj:
        hits.append(_favourite(said, first.group("what"), obj, first.start(), first.end()))
    return hits


def _subject(said: str) -> str | None:
    """The favourite a sentence opens with, when it is the whole subject: a name, or a lower-case noun phrase
    ("koshari is my favourite food"); not a word that opens a clause, nor names and other words mixed ("Mia says
    Wet Leg": someone's report)."""
    if said.removeprefix("The ").split()[0].lower() in _NOT_A_FAVOURITE:
        return None
    if _FAVOURITE_NAME.fullmatch(said):
        return _named(said)
    if said == said.lower():
        obj = object_phrase(said)
        return obj if obj == said else None
    return None


def _named(run: str) -> str | None:
    """A name as said, its article kept ("The Weather Station")."""
    if run.startswith("The "):
        name = clean_name(run.removeprefix("The "))
        return f"The {name}" if name else None
    return clean_name(run)


def _favourite(said: Said, what: str, obj: str, start: int, end: int) -> Hit:
    kind = _FAVOURITE_KINDS.get(what.lower(), what.lower())
    return Hit(Fact(f"favourite:{kind}", obj, f"{said.speaker}'s favourite {what.lower()} is {obj}"), start, end)


def allergies(sentence: str, said: Said) -> list[Hit]:
    """Allergies: "I'm allergic to peanuts and shellfish", "I have a nut allergy", "I'm not allergic to cats"."""
    hits = []
    for match in _ALLERGIC.finditer(sentence):
        value = "not allergic" if match.group("neg") else "allergic"
        chunk = _CLAUSE_END.split(sentence[match.end():], maxsplit=1)[0]
        for item in _LIST_SPLIT.split(chunk):
            obj = object_phrase(item, max_words=3)
            if obj is None:
                break
            hits.append(Hit(Fact(f"allergy:{object_key(obj, plural=True)}", value,
                                 f"{said.speaker} is {value} to {obj}"), match.start(), match.end() + len(obj)))
            if obj != item.strip():
                break  # the list ended inside this item ("shellfish so I ...")
    for match in _ALLERGY.finditer(sentence):
        obj = match.group("obj")
        if not set(obj.split()) & _NOT_ALLERGENS and object_phrase(obj, max_words=2) == obj:
            hits.append(Hit(Fact(f"allergy:{object_key(obj, plural=True)}", "allergic",
                                 f"{said.speaker} has {'an' if obj[0] in 'aeiou' else 'a'} {obj} allergy"),
                            match.start(), match.end()))
    return hits


def diet(sentence: str, said: Said) -> list[Hit]:
    """Diet: "I'm vegetarian", "I went vegan last year", "I'm on a keto diet", "I don't eat meat"."""
    hits = []
    for pattern in _DIETS:
        for match in pattern.finditer(sentence):
            value = match.group("diet").lower()
            value = _DIET_VALUES.get(value, value)
            statement = f"{said.speaker} {_DIET_STATEMENTS.get(value, f'is {value}')}"
            hits.append(Hit(Fact("diet", value, statement), match.start(), match.end()))
    for match in _NO_MEAT.finditer(sentence):
        hits.append(Hit(Fact("diet", "vegetarian", f"{said.speaker} is vegetarian (eats no meat)"),
                        match.start(), match.end()))
    return hits


def _month(name: str) -> int:
    return next(i for i, m in enumerate(MONTHS, 1) if m.lower().startswith(name.lower()[:3]))


def explicit_date(match: patterns.Match) -> tuple[int, int, int | None] | None:
    """(day, month, year or None) of a `DATE` match, or None when no such day exists ("31 February")."""
    day = int(match.group("d1") or match.group("d2"))
    month = _month(match.group("m1") or match.group("m2"))
    year = int(match.group("y")) if match.group("y") else None
    try:
        datetime(year or 2000, month, day)  # 2000 is a leap year: 29 February stays valid
    except ValueError:
        return None
    return day, month, year


def birthday(sentence: str, said: Said) -> list[Hit]:
    """Birthday: "my birthday is March 3rd", "I was born on 3 March 1990", "my birthday is tomorrow"."""
    hits = []
    for pattern, verb in ((_BIRTHDAY, "'s birthday is"), (_BORN, " was born on")):
        for match in pattern.finditer(sentence):
            found = explicit_date(match)
            if found:
                day, month, year = found
                value = f"{day} {MONTHS[month - 1]}" + (f" {year}" if year else "")
                hits.append(Hit(Fact("birthday", value, f"{said.speaker}{verb} {value}"), match.start(), match.end()))
    if hits:
        return hits
    phrases = dates.resolve(sentence, "en", said.ts)
    for match in _BIRTHDAY_RELATIVE.finditer(sentence):
        for phrase in phrases:
            if phrase.start in (match.start(), match.end()) and phrase.period == "day":
                value = f"{phrase.when.day} {MONTHS[phrase.when.month - 1]}"
                hits.append(Hit(Fact("birthday", value, f"{said.speaker}'s birthday is {value}"),
                                min(match.start(), phrase.start), max(match.end(), phrase.end)))
    return hits
