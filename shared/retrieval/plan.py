"""Reading a query once, before searching: its language, the times it names, the words and names that should hit,
the time it asks about, how it asks for a figure, and whether it asks for the order of events. Every step of recall
(the search, the hops, the order for the time asked about, the packing) reads this one plan, and `explain` shows it."""
import functools
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from dateparser.date import DateDataParser

from shared.compress import dates
from shared.compress.extract import STOPWORDS
from shared.evidence import figures
from shared.retrieval import tense, voice
from shared.text import language, patterns, scripts

_MONTHS = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
# Spaces are taken whole (possessive): a digit or a word comes next.
_ABSOLUTE = patterns.compile(r"\b(?:" + _MONTHS + r"(?:\s++\d{1,2})?,?\s++(?:19|20)\d{2}|\d{1,2}\s++" + _MONTHS
                             + r",?\s++(?:19|20)\d{2}|(?:19|20)\d{2})\b")
_ZH_ABSOLUTE = patterns.compile(r"(?:19|20)\d{2}年(?:\d{1,2}月(?:\d{1,2}[日号])?)?")
_TERM = patterns.compile(r"[\w'’-]++")
# Whole words of letters ("w123" is none), joined by - ' . ("Mary-Ann", "O'Brien"): each part ends at a word
# boundary, so the letters are taken whole and the parts are one repetition that ends the pattern.
_NAME_WORD = patterns.compile(r"\b[^\W\d_]++\b(?:[-'’.][^\W\d_]++\b)*+")
_POSSESSIVE = patterns.compile(r"['’]s?$")
NAME_WORDS = 3  # longest name looked for ("Mary Ann Lee")


@dataclass(frozen=True)
class TimeRange:
    """A span of time a query names, e.g. "in May 2023" or "last week"."""

    phrase: str
    start: datetime
    end: datetime


@dataclass(frozen=True)
class QueryPlan:
    """What the retrieval path learned from the query text.

    Args:
        topic: the query without its words for when ("now", "以前"): what BM25 searches and restatements are judged by.
        reading: the time the query asks about (tense.py).
        figure: how it asks for a figure ("how many"), if it does.
        sequence: the words by which it asks for the order of events ("which came first", "先…还是先…"), if it
            does: its evidence then comes in the order things happened, as a timeline.
        roles: the roles whose turns a question in its asker's voice is about ("what did I cook?": the user's),
            voice.py; empty when it is not in the first person or also speaks of the assistant.
    """

    lang: str
    times: list[TimeRange] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    topic: str = ""
    reading: tense.Reading = field(default_factory=lambda: tense.Reading("present", "no time word", explicit=False))
    figure: figures.Asked | None = None
    sequence: str | None = None
    roles: frozenset[str] = frozenset()


def _span(when: datetime, period: str) -> tuple[datetime, datetime]:
    if period == "year":
        start = when.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
        return start, start.replace(year=start.year + 1)
    if period == "month":
        start = when.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        return start, (start + timedelta(days=32)).replace(day=1)
    start = when.replace(hour=0, minute=0, second=0, microsecond=0)
    if period in ("week", "weekend"):
        start -= timedelta(days=start.weekday() if period == "week" else 0)
        return start, start + timedelta(days=7 if period == "week" else 2)
    return start, start + timedelta(days=1)


@functools.lru_cache(maxsize=4096)
def _absolute(phrase: str, lang: str, day: datetime) -> tuple[datetime, str] | None:
    """An absolute date phrase ("May 2023") as a date and its period; the day only fills in a missing year."""
    parser = DateDataParser(languages=[lang] if lang in ("en", "zh") else None,
                            settings={"RETURN_TIME_AS_PERIOD": True, "RELATIVE_BASE": day,
                                      "PREFER_DAY_OF_MONTH": "first"})
    data = parser.get_date_data(phrase)
    return (data.date_obj, data.period or "day") if data.date_obj is not None else None


def _absolute_times(query: str, lang: str, now: datetime) -> list[TimeRange]:
    pattern = _ZH_ABSOLUTE if lang == "zh" else _ABSOLUTE
    day = now.replace(tzinfo=None, hour=0, minute=0, second=0, microsecond=0)
    out = []
    for match in pattern.finditer(query):
        found = _absolute(match.group(0), lang, day)
        if found is not None:
            start, end = _span(found[0].replace(tzinfo=now.tzinfo), found[1])
            out.append(TimeRange(match.group(0), start, end))
    return out


def query_terms(query: str) -> list[str]:
    """Content words of the query (lowercase) and its CJK runs: what 'matched terms' are looked for."""
    words = [w.lower() for w in _TERM.findall(query) if len(w) >= 3 and w.lower() not in STOPWORDS]
    return list(dict.fromkeys(words + scripts.han_runs(query)))


def query_names(query: str) -> list[str]:
    """Every way the query could spell a person's name, to match entries' `persons` exactly.

    Runs of up to three words that neither start nor end with a stopword ("Mary of Teck", not "what did"), each
    as written, lowercase and capitalised, so "melanie's" matches "Melanie"; and the 2-4 character runs inside
    CJK text, where names are not spaced.
    """
    words = [_POSSESSIVE.sub("", w) for w in _NAME_WORD.findall(query)]
    found: dict[str, None] = {}
    for size in range(1, NAME_WORDS + 1):
        for i in range(len(words) - size + 1):
            run = words[i:i + size]
            if len(run[0]) < 2 or len(run[-1]) < 2 or {run[0].lower(), run[-1].lower()} & STOPWORDS:
                continue
            gram = " ".join(run)
            found.update(dict.fromkeys((gram, gram.lower(), " ".join(w.capitalize() for w in run))))
    for han in scripts.han_runs(query):
        for size in range(2, 5):
            found.update(dict.fromkeys(han[i:i + size] for i in range(len(han) - size + 1)))
    return list(found)


def plan(query: str, now: datetime, fallback_language: str = "english") -> QueryPlan:
    """The one reading of a query: language, named times (relative ones resolved against `now`), content terms,
    names, topic, the time it asks about, how it asks for a figure, whether it asks for the order of events, and
    whose turns it is about when it is in its asker's voice."""
    lang = language.detect_iso(query, fallback_language)
    times = [TimeRange(p.phrase, *_span(p.when, p.period)) for p in dates.resolve(query, lang, now)]
    times += _absolute_times(query, lang, now)
    return QueryPlan(lang=lang, times=times, terms=query_terms(query), names=query_names(query),
                     topic=tense.topic(query), reading=tense.read(query, lang), figure=figures.asked(query),
                     sequence=tense.sequence(query), roles=voice.roles(query))
