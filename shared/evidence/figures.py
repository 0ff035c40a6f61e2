"""Questions that ask for a figure, and windows that state one.

"How many beta testers are there now?", "房租每个月多少钱？": the answer is a number, so a window that states none
cannot say what the figure is now, however new it is ("the roadmap for next year is in the works"). The question
is read by its words for a count or an amount (how many / how much / 多少 / 几 before a counter) and the names of
measured things (a latency, a version, a price, a conversion rate). Questions whose answer is usually a date or a
word ("how long has she…", "how old", "how often") are left alone. A window states a figure when its own lines
hold a number that is not a date: digits, or number words and Chinese numerals before a counter or unit. Reading
numbers is the one thing this looks for in the memories; it never reads what they are about.
"""
from dataclasses import dataclass

from shared.compress.facts.tastes import MONTH
from shared.evidence.lines import utterances
from shared.store import MemoryEntry
from shared.text import patterns

# A count or an amount, first (the cue explain shows).
_ASKS_COUNT = (patterns.compile(r"\bhow\s++(?:many|much|big|fast|large|high|heavy|tall|far)\b|\bwhat\s++time\b",
                                patterns.IGNORECASE),
               # 几 asks for a number before a counter (几个人, 几点); 这几天, 好几次, 几号 and 几月 do not.
               patterns.compile(r"多少|(?<![这那前后好没近])几(?=[个位人只条家次岁点块元台辆本张间套层项倍十百千万])"))
# The names of measured things, which are said in numbers.
_ASKS_MEASURE = (patterns.compile(r"\b(?:latency|price|cost|rent|salary|budget|percentage|(?<![-\w])rate|score|"
                                  r"version|number\s++of|size|weight|height|speed|fee|charge|accuracy|uptime|"
                                  r"rating)s?\b", patterns.IGNORECASE),
                 patterns.compile(r"延迟|价格|价钱|价位|什么价|房租|租金|工资|薪水|预算|版本|分数|体重|身高|速度|费用|数量|人数|"
                                  r"(?:转化|留存|成功|增长|点击|崩溃|错误|失败|命中|准确|召回|通过|复购|流失|出勤|入住|"
                                  r"完成|覆盖|丢包|体脂|利|汇|税)率"))
# Dates, in the forms people and the compressor write them: the note beside a relative time ("（2024年5月）",
# "(21 October 2023)"), "9 March 2024", "March 9", "2024-03-15", "9/3", "in 2025", a quarter ("Q1"), 2024年3月15日,
# 三月十五号. A note is read from its bracket to the first year in it, then to its closing bracket, each character once
# (no bracket stands inside a note, so no two notes share one); spaces are taken whole, as a digit or a word follows.
_YEAR = r"\d{4}年|\b(?:19|20)\d{2}\b"
_DATES = patterns.compile(
    r"[（(](?=(?:(?!" + _YEAR + r")[^（()）\n])*+(?:" + _YEAR + r"))[^（()）\n]*+[)）]|"
    r"\b\d{1,2}(?:st|nd|rd|th)?\s++" + MONTH + r"\b(?:,?\s++(?:19|20)\d{2})?|"
    r"\b" + MONTH + r"\.?\s++\d{1,2}(?:st|nd|rd|th)?\b(?:,?\s++(?:19|20)\d{2})?|"
    r"\b" + MONTH + r"\s++(?:19|20)\d{2}\b|"
    r"\b(?:in|since|by|until|till|from|of|year)\s++(?:19|20)\d{2}\b|\b[QH][1-4]\b|"
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|"
    r"\d{4}年(?:\d{1,2}月(?:\d{1,2}[日号])?)?|\d{1,2}月(?:\d{1,2}[日号])?|\d{1,2}[日号]|"
    r"[一二三四五六七八九十]{1,2}月(?:[一二三四五六七八九十]{1,3}[日号])?|[一二三四五六七八九十]{1,3}号",
    patterns.IGNORECASE)
_FIGURE = patterns.compile(
    r"\d|"
    r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(?:thir|four|fif|six|seven|eigh|nine)teen|"
    r"twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|dozen)\b|"
    # a Chinese numeral before a counter or unit ("两千多人", "三个", "八点半"); 十分 alone is "very", 一个 "a"
    r"(?<![零一二两三四五六七八九十百千万亿])(?!十分|一[^零一二两三四五六七八九十百千万亿])"
    r"[零一二两三四五六七八九十百千万亿]++多?[个位人名只家次块元岁倍台辆本张条项分秒斤米点层套间]",
    patterns.IGNORECASE)


_NAMED = patterns.compile(r"[^\W_]*\d[^\W_]*")  # a word with digits: "p95", "Q1", "v2"
# A question whose answer is a date: "when is…" (one about a past event, "when did…", tense.py leaves to relevance
# before this is asked), "what date", "by which day", a deadline; 哪天, 什么时候, 几号, 几月几日, 日期, 截止.
_ASKS_DATE = (patterns.compile(r"\bwhen\b|\b(?:what|which)\s++(?:date|day)\b|\bdeadline\b|\bdue\b",
                               patterns.IGNORECASE),
              patterns.compile(r"哪天|哪一天|什么时候|什么日子|几号|几月几|日期|截止"))


@dataclass(frozen=True)
class Asked:
    """How a question asks for a figure (its cue, for explain), and the words with digits it says itself ("p95"),
    which name what is measured, not its value."""

    cue: str
    named: frozenset[str] = frozenset()


MAX_READ_CHARS = 8_000  # of an entry: a figure stated further in does not make it an answer (a window's own lines
                        # come first; 4 of the longest turns would be 64,000 characters to read per recall candidate)


def named_in(text: str) -> frozenset[str]:
    """The words with digits a question or a claim says ("p95", "Q1"), casefolded: they name what is measured."""
    return frozenset(w.casefold() for w in _NAMED.findall(text))


def asked(query: str) -> Asked | None:
    """How the question asks for a figure, if it does."""
    found = next((m for pattern in (*_ASKS_COUNT, *_ASKS_MEASURE) if (m := pattern.search(query))), None)
    if found is None:
        return None
    return Asked(found.group(0), named_in(query))


def stated(entry: MemoryEntry, besides: frozenset[str] = frozenset()) -> bool:
    """Whether an entry's own lines state a figure: a number that is not a date, nor a word with digits the
    question said itself (`besides`: "what is the p95 latency?" is not answered by a window that says "p95")."""
    return figured("\n".join(utterances(entry.text[:MAX_READ_CHARS])), besides)


_NUMBER = patterns.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")


def numbers(text: str) -> frozenset[str]:
    """The numbers written in digits in a text, thousands separators dropped ("42,000" and "42000" are one)."""
    return frozenset(m.group(0).replace(",", "") for m in _NUMBER.finditer(text[:MAX_READ_CHARS]))


def asks_date(query: str) -> str | None:
    """The words by which a question asks for a date, if it does (for explain)."""
    found = next((m for pattern in _ASKS_DATE if (m := pattern.search(query))), None)
    return None if found is None else found.group(0)


def dated(text: str) -> bool:
    """Whether these lines (an entry's own, or a fact's) state a date."""
    return _DATES.search(text[:MAX_READ_CHARS]) is not None


def figured(text: str, besides: frozenset[str] = frozenset()) -> bool:
    """Whether these lines state a figure that is not a date (see `stated`)."""
    text = _DATES.sub(" ", text[:MAX_READ_CHARS])
    if besides and any(word in text.casefold() for word in besides):
        text = _NAMED.sub(lambda m: " " if m.group(0).casefold() in besides else m.group(0), text)
    return _FIGURE.search(text) is not None
