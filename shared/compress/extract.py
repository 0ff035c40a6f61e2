"""Cheap, deterministic extraction of persons, entities and keywords from a window's text."""
from collections import Counter
from collections.abc import Iterable

from shared.text import patterns, scripts

_WORD = patterns.compile(r"[A-Za-zÀ-ÿ][A-Za-zÀ-ÿ'’-]*+")
# A word's letters are taken whole (possessive): fewer of them never end it at a word boundary. Each word of the run
# ends at one, so the run is one possessive repetition at the end of the pattern (read once, by the attempt it ends).
_CAP = r"(?:[A-Z][a-zà-ÿ]++|[A-Z]{2,}+[a-z]*+)\b"
_CAPITALIZED_RUN = patterns.compile(r"(?<![.!?]\s)(?<!^)\b(" + _CAP + r"(?:\s++" + _CAP + r")*+)")
# Words introducing a person's name ("my friend Jo", "with Sam").
_PERSON_CUE = patterns.compile(
    r"\b(?:friend|friends|sister|brother|mom|mum|dad|mother|father|son|daughter|husband|wife|partner|"
    r"cousin|aunt|uncle|grandma|grandpa|grandmother|grandfather|boss|colleague|coworker|neighbor|neighbour|"
    r"teacher|coach|mentor|doctor|therapist|roommate|girlfriend|boyfriend|fiance|fiancee|kid|baby|named|called|with|met|"
    r"hey|hi|hello|thanks|dear)\s++([A-Z][a-z]++)\b")
_ZH_PARTICLES = patterns.compile(r"[的了是在我你他她它们吗呢吧啊呀也都就还和与跟去到要会说很又把被]")
STOPWORDS = frozenset("""
a about above after again against all also am an and any are aren't as at be because been before being below
between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each few
for from further get got had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself just let's like me more most
mustn't my myself no nor not now of off on once only or other ought our ours ourselves out over own really same
shan't she she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves then
there there's these they they'd they'll they're they've this those through to too under until up very was wasn't
we we'd we'll we're we've were weren't what what's when when's where where's which while who who's whom why why's
will with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves yeah yes oh wow hey hi
hello thanks thank great good awesome cool sure okay ok lot lots much many one two also even still going gonna
know think feel make made want wanted really something things thing way time sounds glad love loved amazing
""".split())  # noqa: SIM905
_NOT_ENTITIES = frozenset({"I", "I'm", "I've", "I'll", "I'd", "OK", "Ok", "Hey", "Hi", "Hello", "Thanks", "Wow", "Yes",
                           "Yeah", "Oh", "Sure", "Congrats", "Awesome", "Great", "Good", "Thank", "Bye", "Omg", "LOL",
                           "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
                           "January", "February", "March", "April", "June", "July", "August", "September",
                           "October", "November", "December"})


def persons(speakers: Iterable[str], texts: Iterable[str]) -> list[str]:
    """Speakers, then people named after a cue word ("my friend Jo"), in first-seen order."""
    found = dict.fromkeys(s for s in speakers if s)
    for text in texts:
        for match in _PERSON_CUE.finditer(text):
            name = match.group(1)
            if name not in _NOT_ENTITIES and name.lower() not in STOPWORDS:
                found.setdefault(name, None)
    return list(found)


def entities(texts: Iterable[str], exclude: Iterable[str] = (), limit: int = 12) -> list[str]:
    """Capitalised names and acronyms that do not start a sentence (places, groups, titles), minus `exclude`."""
    skip = set(exclude) | _NOT_ENTITIES
    found: dict[str, None] = {}
    for text in texts:
        for match in _CAPITALIZED_RUN.finditer(text):
            name = match.group(1)
            if name not in skip and name.lower() not in STOPWORDS:
                found.setdefault(name, None)
    return list(found)[:limit]


def keywords(texts: Iterable[str], exclude: Iterable[str] = (), limit: int = 8) -> list[str]:
    """The most frequent content words (Latin scripts) and CJK segments, most frequent first."""
    skip = {e.lower() for e in exclude}
    counts: Counter[str] = Counter()
    for text in texts:
        for word in _WORD.findall(text):
            lower = word.lower().strip("'’-")
            if len(lower) >= 4 and lower not in STOPWORDS and lower not in skip:
                counts[lower] += 1
        for run in scripts.han_runs(text):
            for segment in _ZH_PARTICLES.split(run):
                if len(segment) >= 2:
                    counts[segment] += 1
    return [word for word, _ in counts.most_common(limit)]
