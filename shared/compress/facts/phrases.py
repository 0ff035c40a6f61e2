"""The shapes of English phrases a fact may name: proper names (places, employers, people) and short objects."""
from shared.compress.facts.vocabulary import ACTIVITIES, NOT_NAMES
from shared.text import patterns

# Latin letters with their accents and the letters of Central European names ("Wrocław", "Inés", "Łódź"), not
# only ASCII: a name cut at its first accent ("Wroc") is a wrong fact.
LETTER = "A-Za-zÀ-ÖØ-öø-ɏ"
_EXTENDED = [chr(c) for c in range(0x100, 0x250)]  # Latin Extended-A and -B mix cases letter by letter
_UPPER = "A-ZÀ-ÖØ-Þ" + "".join(c for c in _EXTENDED if c.isupper())
_LOWER = "a-zß-öø-ÿ" + "".join(c for c in _EXTENDED if c.islower())
# A word is at most MAX_WORD characters and a name at most MAX_NAME_WORDS words, so that a rule reads a bounded
# stretch of a sentence (the longest place names are some 60 letters; a longer word is no name here).
MAX_WORD = 64
MAX_NAME_WORDS = 12
_WORD = rf"[{_UPPER}][{LETTER}&'-]{{0,{MAX_WORD - 2}}}[{LETTER}]"
CAP_WORD = r"(?:St\.|Mt\.|Ft\.|" + _WORD + r")"
# A run of capitalised words, with the lower-case particles place names carry ("Rio de Janeiro"). Nothing in it may
# start with a space, so the spaces are taken whole (possessive): there is no other way to read them.
CAP_RUN = CAP_WORD + r"(?:\s++(?:(?:of|de|da|do|del|la|le|von|van|upon)\s++)?" + CAP_WORD + \
    rf"){{0,{MAX_NAME_WORDS - 1}}}"
PERSON_NAME = (rf"[{_UPPER}][{_LOWER}]{{1,{MAX_WORD}}}(?:-[{_UPPER}][{_LOWER}]{{1,{MAX_WORD}}})?"
               rf"(?:\s++[{_UPPER}][{_LOWER}]{{1,{MAX_WORD}}})?")

PRONOUNS = frozenset("""
i me my mine myself you your yours yourself he him his she her hers we us our ours they them their theirs it its
this that these those y'all u ur i'm it's that's you're there here
""".split())  # noqa: SIM905
NOT_OBJECT_START = PRONOUNS | frozenset("""
the a an how what when where why who which whoever whatever to being having getting doing seeing hearing knowing
feeling all both every each some any so such another more most very too much many lots lot one ones someone
is are was were am be been has had have do does did can could will would should may might must gonna wanna
something anything everything nothing everyone everybody anyone just really also still even only not no yes yeah
like about mom dad mum husband wife family son daughter sister brother boyfriend girlfriend partner parents kids
children grandma grandpa friends love
""".split())  # noqa: SIM905
# Words that end an object: a new clause, a time, a degree ("I love hiking so much because ...").
_CUT_WORDS = frozenset("""
because but and with so when since though although as if or while whenever cause cuz 'cause like too lately now
anymore nowadays either who which that where whereas sometimes always usually often again today tonight tomorrow
yesterday these this last next every each all more most even already right here there though
""".split())  # noqa: SIM905
_PREPOSITIONS = frozenset("""
in at on for from during after before around near by over under through into without
""".split())  # noqa: SIM905
_PUNCT = patterns.compile(r"\s+[-–—]\s+|[,.;:!?()\"“”…]|\s[-–—]|[-–—]\s")
_SPACE = patterns.compile(r"\s++")
_PLAIN_WORD = patterns.compile(rf"[{LETTER}][{LETTER}'&-]*+")


def clean_name(run: str) -> str | None:
    """A capitalised run cut before its first word that cannot be part of a name, or None if nothing is left."""
    words = run.split()
    kept: list[str] = []
    for word in words:
        if word in NOT_NAMES:
            break
        kept.append(word)
    while kept and kept[-1][0].islower():  # a dangling particle ("Rio de")
        kept.pop()
    if not kept or kept[-1].endswith(("'s", "’s")):
        return None
    return " ".join(kept)


def object_phrase(text: str, max_words: int = 5) -> str | None:
    """The noun phrase or activity at the start of `text`, or None when it is not one (a pronoun, "to" + verb).

    The phrase ends at punctuation or a word that starts a clause, a time or a degree; past `max_words` it is
    refused rather than cut, since a long object is usually a clause the rules misread.
    """
    punct = _PUNCT.search(text)
    head = text[:punct.start()] if punct else text
    words: list[str] = []
    cut_by_word = False
    for word in _SPACE.split(head.strip()):
        lower = word.lower()
        if not word:
            break
        if lower in _CUT_WORDS or (words and lower in _PREPOSITIONS):
            cut_by_word = True
            break
        words.append(word)
    if not words or len(words) > max_words:
        return None
    lowers = [w.lower() for w in words]
    if not cut_by_word and punct and punct.group(0) == "," and {"a", "an", "the"} & set(lowers):
        return None  # a comma inside a noun phrase ("creating a safe, inviting place") cut it short
    if lowers[0] in NOT_OBJECT_START or any(w in PRONOUNS for w in lowers) or words[0] in NOT_NAMES:
        return None
    if not all(_PLAIN_WORD.fullmatch(w) for w in words):
        return None  # numbers, emoji, quotes: not a plain noun phrase
    if any(w.endswith("'s") for w in lowers):
        return None  # someone else's thing ("Caroline's idea") is a remark about it, not a taste
    if len(words) == 1 and lowers[0].endswith("ing") and lowers[0] not in ACTIVITIES:
        return None  # "I love working with kids" -> "working" alone says nothing
    return " ".join(words)
