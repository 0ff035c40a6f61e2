"""How English turns are read: sentences, which of them are plain first-person statements, and the rules."""
from shared.compress.facts import changes, life, people, plans, tastes
from shared.compress.facts.fact import Reader
from shared.text import patterns

# Whitespace is taken whole (possessive): nothing after it may start with whitespace. A line break that does not
# follow another one opens a run of them, so only its first is a place to start.
_SPLIT = patterns.compile(r"(?<=[.!?…])(?<!\bSt\.)(?<!\bMt\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bMrs\.)\s++"
                          r"|(?<!\n)\n++")
_FILLER = patterns.compile(r"^(?:(?:oh|so|and|but|well|hey|wow|yeah|yes|haha|lol|ok|okay|also|plus|anyway|btw|hmm|"
                           r"umm?|uh)\b[,!.]*+\s*+)++", patterns.IGNORECASE)
_QUESTION_WORDS = (r"do|does|did|are|is|was|were|have|has|had|can|could|would|will|should|shall|may|might|am|what|"
                   r"where|when|why|how|who|which|whose|whom")
_QUESTION_START = patterns.compile(r"^(?:" + _QUESTION_WORDS + r")\b", patterns.IGNORECASE)
# Words before a match that make it a supposition, a wish, someone else's claim or a time other than now.
_NOT_PLAIN_BEFORE = patterns.compile(
    r"\b(?:if|unless|whether|suppose|supposing|imagine|imagining|maybe|perhaps|wish|wished|hope|hoping|hoped|dream|"
    r"dreaming|dreamed|would|wouldn't|could|couldn't|might|should|shouldn't|want|wants|wanted|wanna|thinking|"
    r"considering|pretend|pretending|not sure|don't think|never|when|whenever|once|until|till|before|after|"
    r"someday|one day|probably|says|said|say|told|tells|thinks|thought|believes|believed|assume|assumes|assumed|"
    r"heard|joke|joking|kidding|used to|pretended|lie|lied|lying|assuming|hypothetically|hypothetical|"
    r"theoretically|in theory|supposedly|think|\w++'d)\b",
    patterns.IGNORECASE)
# A noun just before the match makes "I love" a relative clause ("doing something I love is awesome").
_RELATIVE_BEFORE = patterns.compile(r"\b(?:something|anything|everything|nothing|thing|things|stuff|what|that|which|"
                                    r"whatever|who|whom|one|ones|people|person|place|places|way|all)\s*+$",
                                    patterns.IGNORECASE)
# Words after a match that say the state is over or only conditional ("I moved to Ohio when I was ten").
_NOT_PLAIN_AFTER = patterns.compile(
    r"\b(?:when I was|as a (?:kid|child|teen|teenager|little girl|little boy)|back then|at the time|back in the day|"
    r"passed away|died|divorced|broke up|split up|but (?:then|now|not anymore|no longer)|until|till|if|unless|"
    r"in (?:my|a) dreams?|years? before)\b",
    patterns.IGNORECASE)


# Chat asks in the same sentence as it tells ("I just moved to Porto, any tips for a dentist?"): a clause that opens
# a question after a comma or a dash is a sentence of its own, so the statement before it is read. The question runs
# to the sentence's final question mark with no other stop in between (`_asked_apart`).
_ASKS = (_QUESTION_WORDS + r"|so|and|but|also|btw|any|anyone|anybody|anything|tips|ideas|thoughts|suggestions|"
         r"recommendations")
_THEN_ASKED = patterns.compile(r"(?:,|\s[-–—])\s++(?=(?:" + _ASKS + r")\b)", patterns.IGNORECASE)


def sentences(text: str) -> list[str]:
    """`text` split into sentences (punctuation kept), with typographic apostrophes made plain, and a question's
    opening statement apart from it."""
    plain = text.replace("’", "'").replace("‘", "'")
    out: list[str] = []
    for sentence in (s.strip() for s in _SPLIT.split(plain) if s and s.strip()):
        out += [part.strip() for part in _asked_apart(sentence) if part.strip()]
    return out


def _asked_apart(sentence: str) -> list[str]:
    """`sentence` cut before each clause that opens a question running to its final question mark: after the last
    stop (. ! ?) before that mark, so each place is looked at once, not read to the end from every comma."""
    told = sentence.rstrip()
    if not told.endswith("?"):
        return [sentence]
    last_stop = max(told.rfind(stop, 0, len(told) - 1) for stop in ".!?")
    parts, start = [], 0
    for match in _THEN_ASKED.finditer(sentence, last_stop + 1):
        parts.append(sentence[start:match.start()])
        start = match.end()
    return [*parts, sentence[start:]]


def is_question(sentence: str) -> bool:
    """A question by its mark or its first word ("Do you live in Paris", "Have you moved to Lyon?")."""
    return sentence.rstrip().endswith("?") or bool(_QUESTION_START.match(_FILLER.sub("", sentence.lstrip())))


def blocked(before: str, after: str) -> bool:
    """Whether the words around a match make it a supposition, a wish, a report or a state that is over."""
    return bool(_NOT_PLAIN_BEFORE.search(before) or _RELATIVE_BEFORE.search(before) or _NOT_PLAIN_AFTER.search(after))


READER = Reader(sentences=sentences, is_question=is_question, blocked=blocked, rules=(
    life.lives_in, life.origin, life.works_at, life.occupation, life.studies, people.pets, people.partner,
    people.family, tastes.preferences, tastes.allergies, tastes.diet, tastes.birthday, plans.english_plans,
    changes.english))
