"""Questions that ask for a figure, and windows that state one.

"How many beta testers are there now?", "房租每个月多少钱？": the answer is a number, so a window that states none
cannot say what the figure is now, however new it is ("the roadmap for next year is in the works"). Only the
question's words are read: its words for a quantity (how many / how much / 多少 / 几) and the names of measured
things (a latency, a version, a price, a rate, 转化率), never the wording of the memories. A window states a figure
when its own lines hold a number other than a date: digits, number words or Chinese numerals.
"""
import re

from shared.consolidation.importance import utterances
from shared.store import MemoryEntry

# How much / how many first (the cue explain shows), then the nouns of measured things, which are said in
# numbers: a latency, a version, a price, a rate. 几月 / 哪一年 ask for a date (an event, tense.py), 周几 a weekday,
# 几乎 is "almost"; 效率 / 频率 / 概率 are not figures people quote.
_ASKS = (re.compile(r"\bhow\s+(?:many|much|long|often|far|old|big|fast|large|high|heavy)\b|\bwhat\s+time\b",
                    re.IGNORECASE),
         re.compile(r"多少|(?<![周期拜])几(?![乎月])|多久|多长|多大|多高|多远|多快|多重"),
         re.compile(r"\b(?:latency|price|cost|rent|salary|budget|percentage|rate|score|version|number\s+of|count|size|"
                    r"weight|height|age|speed|fee)s?\b", re.IGNORECASE),
         re.compile(r"延迟|价格|价钱|房租|租金|工资|薪水|预算|版本|分数|体重|身高|年龄|速度|费用|"
                    r"[\u4e00-\u9fff]{1,2}(?<![效频概])率"))
# The dates the compressor writes beside relative times ("（2024年5月）", "(21 October 2023)"), and dates as such.
_DATE_NOTE = re.compile(r"[（(][^（()）\n]*\d{4}[^（()）\n]*[)）]")
_DATE = re.compile(r"\d{4}年(?:\d{1,2}月(?:\d{1,2}[日号])?)?|\d{1,2}月\d{1,2}[日号]|\b(?:19|20)\d{2}\b")
_FIGURE = re.compile(r"\d|[一二两三四五六七八九十]*[十百千万亿][一二三四五六七八九十]*|"
                     r"[两三四五六七八九][个位人只次天周月年块元岁倍点]|"
                     r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(?:thir|four|fif|six|seven|"
                     r"eigh|nine)teen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|"
                     r"billion|dozen|half|double|twice)\b", re.IGNORECASE)


def asked(query: str) -> str | None:
    """The words by which the question asks for a figure, if it does."""
    found = next((m for pattern in _ASKS if (m := pattern.search(query))), None)
    return found.group(0) if found else None


def stated(entry: MemoryEntry) -> bool:
    """Whether an entry's own lines state a figure (a number, not a date)."""
    text = _DATE.sub(" ", _DATE_NOTE.sub(" ", "\n".join(utterances(entry.text))))
    return _FIGURE.search(text) is not None
