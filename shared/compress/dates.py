"""Relative time phrases ("yesterday", "last Saturday", "下周五") found in a turn and resolved by dateparser."""
import functools
from dataclasses import dataclass
from datetime import datetime, timedelta

from dateparser.date import DateDataParser

from shared.text import patterns

_EN_UNITS = r"(?:days?|weeks?|weekends?|months?|years?)"
_EN_COUNT = r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d{1,3})"
_EN_DAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_EN_SPANS = r"(?:week|weekend|month|year|summer|winter|spring|fall|autumn|night|" + _EN_DAYS[3:-1] + r")"
# Finding candidate phrases is pattern work; what they mean is left to dateparser.
_PATTERNS = {
    "en": patterns.compile(
        r"\b(?:the day before yesterday|the day after tomorrow|yesterday|today|tonight|tomorrow|"
        r"(?:last|next|this|past|coming) " + _EN_SPANS + r"|"
        + _EN_COUNT + r" " + _EN_UNITS + r" ago|in " + _EN_COUNT + r" " + _EN_UNITS + r")\b",
        patterns.IGNORECASE),
    "zh": patterns.compile(
        r"大前天|前天|昨天|昨晚|今天|今晚|明天|后天|去年|今年|明年|前年|上个月|下个月|这个月|本月|"
        r"(?:上|下|这|本)个?(?:周|星期|礼拜)[一二三四五六日天]?|"
        r"[一二三四五六七八九十两几\d]+(?:天|周|个星期|个月|年)(?:前|以前|之前|后|以后|之后)"),
}
_ZH_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_EN_WEEKEND = patterns.compile(r"\bweekend\b", patterns.IGNORECASE)
_FUTURE = patterns.compile(r"\b(?:next|coming|tomorrow|in \w++ \w++)\b|^(?:下|明|后)|(?:后|以后|之后)$",
                           patterns.IGNORECASE)


@dataclass(frozen=True)
class ResolvedPhrase:
    """A relative time phrase in a text and the absolute time it stands for."""

    start: int
    end: int
    phrase: str
    when: datetime
    period: str  # day, week, weekend, month, year

    def render(self, lang: str) -> str:
        """The absolute time as words a reader (and BM25) can match."""
        when = self.when
        if lang == "zh":
            if self.period == "year":
                return f"{when.year}年"
            if self.period == "month":
                return f"{when.year}年{when.month}月"
            if self.period in ("week", "weekend"):
                return f"{when.year}年{when.month}月{when.day}日那周"
            return f"{when.year}年{when.month}月{when.day}日"
        if self.period == "year":
            return str(when.year)
        if self.period == "month":
            return when.strftime("%B %Y")
        if self.period == "week":
            monday = when - timedelta(days=when.weekday())
            return f"the week of {monday.day} {monday.strftime('%B %Y')}"
        if self.period == "weekend":
            return f"the weekend of {when.day} {when.strftime('%B %Y')}"
        return f"{when.day} {when.strftime('%B %Y')}"


def _parse(phrase: str, lang: str, base: datetime) -> tuple[datetime, str] | None:
    # What a phrase means depends on the day it was said, not the time of day (the phrases are day-grained):
    # resolved once per phrase, language and day. Parsing is the cost (0.29 ms a phrase measured; building a
    # parser, 0.01 ms), and a conversation repeats its phrases on its days.
    return _parse_on_day(phrase.lower(), lang, base.replace(hour=0, minute=0, second=0, microsecond=0))


@functools.lru_cache(maxsize=16_384)
def _parse_on_day(phrase: str, lang: str, day: datetime) -> tuple[datetime, str] | None:
    prefer = "future" if _FUTURE.search(phrase) else "past"
    # RELATIVE_BASE is a parser setting, so each day needs its own parser (cheap once languages are loaded).
    parser = DateDataParser(languages=[lang], settings={
        "RELATIVE_BASE": day, "PREFER_DATES_FROM": prefer, "RETURN_TIME_AS_PERIOD": True})
    data = parser.get_date_data(phrase)
    if data.date_obj is None:
        return None
    return data.date_obj, data.period or "day"


def _resolve(phrase: str, lang: str, base: datetime) -> tuple[datetime, str] | None:
    naive = base.replace(tzinfo=None)
    if lang == "zh" and phrase[-1] in _ZH_WEEKDAY and any(w in phrase for w in ("周", "星期", "礼拜")):
        week = _parse(phrase[:-1], lang, naive)  # dateparser knows 下周 / 上周, not 下周五
        if week is None:
            return None
        monday = week[0] - timedelta(days=week[0].weekday())
        return monday + timedelta(days=_ZH_WEEKDAY[phrase[-1]]), "day"
    if lang == "en" and _EN_WEEKEND.search(phrase):
        found = _parse(_EN_WEEKEND.sub("saturday", phrase), lang, naive)  # dateparser has no "weekend"
        return (found[0], "weekend") if found else None
    return _parse(phrase, lang, naive)


def resolve(text: str, lang: str, base: datetime) -> list[ResolvedPhrase]:
    """Every relative time phrase in `text` resolved against `base` (the turn's timestamp).

    Args:
        lang: an ISO code ("en", "zh"); other languages resolve nothing yet.
    """
    pattern = _PATTERNS.get(lang)
    if pattern is None:
        return []
    out = []
    for match in pattern.finditer(text):
        found = _resolve(match.group(0), lang, base)
        if found is not None:
            when, period = found
            out.append(ResolvedPhrase(match.start(), match.end(), match.group(0), when.replace(tzinfo=base.tzinfo),
                                      "day" if period in ("part_of_day", "time") else period))
    return out


def annotate(text: str, lang: str, base: datetime) -> tuple[str, list[ResolvedPhrase]]:
    """`text` with each resolved phrase followed by its absolute time, e.g. "yesterday (7 May 2023)"."""
    found = resolve(text, lang, base)
    parts, last = [], 0
    for item in found:
        parts.append(text[last:item.end])
        parts.append(f"（{item.render(lang)}）" if lang == "zh" else f" ({item.render(lang)})")
        last = item.end
    parts.append(text[last:])
    return "".join(parts), found
