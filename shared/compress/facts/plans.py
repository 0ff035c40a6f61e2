"""Plans: a first-person intention with a time that resolves to a date not yet past ("I'm going to Japan next month").

A plan without a resolvable time is left out: "I'm going to keep painting" is a mood, not a dated fact.
"""
from dataclasses import dataclass
from datetime import datetime

from shared.compress import dates
from shared.compress.facts.fact import Fact, Hit, Said, object_key
from shared.compress.facts.life import ME
from shared.compress.facts.numerals import ZH_NUMBER, zh_int
from shared.compress.facts.phrases import CAP_RUN, LETTER, PRONOUNS, clean_name
from shared.compress.facts.tastes import DATE, MONTHS, explicit_date
from shared.text import patterns


@dataclass(frozen=True)
class When:
    """A time a plan names: where it is in the sentence, and its absolute rendering."""

    start: int
    end: int
    text: str  # "in June 2024", "on 17 May 2024" / "2024年6月"


# A few adverbs at most, so a rule reads a bounded stretch; spaces are taken whole (a verb comes next).
_ADVERBS = r"(?:(?:also|still|really|definitely|finally|actually|officially) ){0,8}"
_INTEND = patterns.compile(ME + r"(?:'m| am) " + _ADVERBS + r"(?P<how>going to|gonna|planning to)\s++|"
                           + ME + r" " + _ADVERBS + r"(?:plan to|intend to|will)\s++|" + ME + r"'ll\s++" + _ADVERBS)
_PROGRESSIVE = patterns.compile(ME + r"(?:'m| am) " + _ADVERBS + r"(?P<verb>flying|moving|heading|traveling|"
                                r"travelling|driving|leaving|visiting|starting|taking|attending|running|hosting)\s++")
_BASE = {"flying": "fly", "moving": "move", "heading": "head", "traveling": "travel", "travelling": "travel",
         "driving": "drive", "leaving": "leave", "visiting": "visit", "starting": "start", "taking": "take",
         "attending": "attend", "running": "run", "hosting": "host"}
# Verbs of talk and state: "I'll tell you tomorrow", "I'm going to be busy next week" are not plans.
_NOT_PLAN_VERBS = frozenset("""
be have need try keep miss feel think let tell say ask talk know guess bet remember never not probably maybe always
just still send share post text email reply check look do stay hope wait die cry sleep rest
""".split())  # noqa: SIM905
_CUT = patterns.compile(r"[,.;:!?()\"“”…]|\s[-–—]|\b(?:because|but|and|with|so|since|though|although|while|if|when|"
                        r"which|who|where|cause|for (?:a |an |the |a few |a couple of |\d++ |one |two |three |"
                        r"several )?(?:days?|weeks?|months?|years?|nights?|weekends?|while))\b")
_NO_NOUN = frozenset({"some", "any", "more", "one", "ones", "few", "lots", "plenty", "all", "both", "most",
                      "another", "again", "instead", "too", "either", "loads", "heaps", "tons"})
_TRAILING = frozenset({"for", "in", "on", "at", "by", "to", "the", "a", "an", "this", "next", "coming"})
_LEADING = frozenset({"to", "for", "at", "in", "into", "on", "with"})
_WEEKDAY = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_EN_EXPLICIT = patterns.compile(
    r"\b(?:on |in |by )?(?:" + DATE + r"|(?P<mo>" + "|".join(MONTHS) + r")(?: (?P<yr>20\d\d))?\b)")
_EN_LOOSE_TIME = patterns.compile(r"\b(?:on|this|next|coming) " + _WEEKDAY + r"\b|\bsoon\b|\blater\b")
_PLACE_NEXT = patterns.compile(r"(?:[A-Z]|(?:a|an|the|my) )")  # "going to Japan", "going to the coast"
_VERB_NEXT = patterns.compile(r"[a-z]")
_PLAIN_WORD = patterns.compile(rf"[{LETTER}0-9][{LETTER}0-9'&-]*+")
_NAME = patterns.compile(CAP_RUN)
_PREPOSITION = {"day": "on", "weekend": "on", "week": "in", "month": "in", "year": "in"}


def _future(phrase: dates.ResolvedPhrase, now: datetime) -> bool:
    when, today = phrase.when.date(), now.date()
    if phrase.period == "year":
        return when.year >= today.year
    if phrase.period == "month":
        return (when.year, when.month) >= (today.year, today.month)
    if phrase.period in ("week", "weekend"):
        return (when - today).days >= -6
    return when >= today


def _by(sentence: str, start: int) -> str | None:
    # "finish it by next month" is a deadline, not a date: keep the "by".
    return "by" if sentence[:start].rstrip().lower().endswith(" by") else None


def _english_times(sentence: str, now: datetime) -> list[When]:
    times = [When(p.start, p.end, f"{_by(sentence, p.start) or _PREPOSITION.get(p.period, 'on')} {p.render('en')}")
             for p in dates.resolve(sentence, "en", now) if _future(p, now)]
    for match in _EN_EXPLICIT.finditer(sentence):
        if match.group("mo"):
            month = MONTHS.index(match.group("mo")) + 1
            year = int(match.group("yr") or (now.year if month >= now.month else now.year + 1))
            if (year, month) >= (now.year, now.month):
                times.append(When(match.start(), match.end(), f"in {MONTHS[month - 1]} {year}"))
            continue
        found = explicit_date(match)
        if found:
            day, month, year_given = found
            year = year_given or (now.year if (month, day) >= (now.month, now.day) else now.year + 1)
            if (year, month, day) >= (now.year, now.month, now.day):
                times.append(When(match.start(), match.end(), f"on {day} {MONTHS[month - 1]} {year}"))
    return sorted(times, key=lambda w: w.start)


def _what(sentence: str, start: int, stops: list[int], speaker: str) -> str | None:
    """The verb phrase from `start` up to the first time, punctuation or new clause, with "my" made the speaker's."""
    end = min([s for s in stops if s > start] + [len(sentence)])
    text = sentence[start:end]
    cut = _CUT.search(text)
    words = (text[:cut.start()] if cut else text).split()
    while words and words[-1].lower() in _TRAILING:
        words.pop()
    if not 2 <= len(words) <= 8 or words[0].lower() in _NOT_PLAN_VERBS or not words[0].isalpha():
        return None
    out = []
    for word in words:
        lower = word.lower()
        if lower == "my":
            out.append(f"{speaker}'s")
        elif lower == "me":
            out.append(speaker)
        elif lower in PRONOUNS or lower in ("something", "anything", "everything", "stuff", "things") or \
                not _PLAIN_WORD.fullmatch(word):
            return None
        else:
            out.append(word)
    # "I'll make some tonight": a quantity with no noun names nothing to plan
    return None if all(w.lower() in _NO_NOUN for w in out[1:]) else " ".join(out)


def _plan_key(what: str, speaker: str) -> str:
    # The verb goes, and the speaker's possessive: the object names the plan ("visit Ana's parents" -> "parents").
    words = [w for w in what.split()[1:] if w != f"{speaker}'s"]
    while len(words) > 1 and words[0].lower() in _LEADING:
        words = words[1:]
    return object_key(" ".join(words))


def english_plans(sentence: str, said: Said) -> list[Hit]:
    """English plans: "I'm going to Japan next month", "I'll start my new job tomorrow"."""
    times = _english_times(sentence, said.ts)
    if not times:
        return []
    stops = [t.start for t in times] + [m.start() for m in _EN_LOOSE_TIME.finditer(sentence)]
    hits = []
    for match in _INTEND.finditer(sentence):
        start = match.end()
        rest = sentence[start:]
        going = match.group("how") in ("going to", "gonna")
        what = None
        if going and _PLACE_NEXT.match(rest):
            what = _what("go to " + rest, 0, [s - start + 6 for s in stops], said.speaker)
        elif not going or _VERB_NEXT.match(rest):
            what = _what(sentence, start, stops, said.speaker)
        if what:
            hits.append(_plan(said, what, times, match.start(), start + len(what)))
    for match in _PROGRESSIVE.finditer(sentence):
        verb = _BASE[match.group("verb")]
        what = _what(f"{verb} " + sentence[match.end():], 0, [s - match.end() + len(verb) + 1 for s in stops],
                     said.speaker)
        if what:
            hits.append(_plan(said, what, times, match.start(), match.end()))
    return hits


def _plan(said: Said, what: str, times: list[When], start: int, end: int) -> Hit:
    # The time nearest the intention is the plan's; "Last week I decided I'm flying out next month" has one future.
    when = min(times, key=lambda t: abs(t.start - end))
    value = f"{what} {when.text}"
    names = (clean_name(m.group(0)) for m in _NAME.finditer(what))
    entities = tuple(n for n in names if n and n != said.speaker and not n.startswith(f"{said.speaker}'"))
    return Hit(Fact(f"plan:{_plan_key(what, said.speaker)}", value, f"{said.speaker} plans to {value}",
                    entities=entities), start, end)


_ZH_INTEND = patterns.compile(r"我(?P<pre>[^，。！？!?,；\s我你他她]{0,8}?)(?:打算|计划|准备|将要|将会|将|要|会)"
                              r"(?P<rest>[^，。！？!?,；\s]{2,20})")
_ZH_PLAN_VERBS = ("去", "到", "回", "飞", "搬", "参加", "开始", "学", "看", "拜访", "旅游", "旅行", "结婚", "买", "换",
                  "找", "考", "出差", "出国", "入职", "装修", "办", "举办", "带", "见", "报名", "陪", "跑", "上")
_ZH_NOT_IN_PLAN = patterns.compile(r"[你他她它这那吗呢吧么]|什么|可能|也许")
_ZH_PARTICLE_TAIL = patterns.compile(r"(?:了|啦|呀|啊|哦|喔)+$")
_ZH_EXPLICIT = patterns.compile(r"(?:(?P<y>\d{4})年)?(?P<m>" + ZH_NUMBER + r")月(?:份|(?P<d>" + ZH_NUMBER
                                + r")[日号])?")
_ZH_KEY_HEAD = patterns.compile(r"^(?:去|到|回|飞往|飞到|飞|搬到|搬去|参加|拜访|看望|看)+")
_ZH_UNSURE = patterns.compile(r"[不没想]|可能|也许|应该")
_ZH_MY = patterns.compile(r"我(?=[\u4e00-\u9fff])(?![们自])")
_ZH_KEY_TAIL = patterns.compile(r"(?:玩|旅游|旅行|一趟|出差|看看|逛逛)+$")


def _chinese_times(sentence: str, now: datetime) -> list[When]:
    times = [When(p.start, p.end, p.render("zh")) for p in dates.resolve(sentence, "zh", now) if _future(p, now)]
    for match in _ZH_EXPLICIT.finditer(sentence):
        month = zh_int(match.group("m"))
        day = zh_int(match.group("d")) if match.group("d") else None
        if not 1 <= month <= 12 or (day is not None and not 1 <= day <= 31):
            continue
        year = int(match.group("y")) if match.group("y") else (
            now.year if (month, day or 31) >= (now.month, now.day) else now.year + 1)
        if (year, month, day or 31) >= (now.year, now.month, now.day):
            times.append(When(match.start(), match.end(), f"{year}年{month}月" + (f"{day}日" if day else "")))
    return sorted(times, key=lambda w: w.start)


def chinese_plans(sentence: str, said: Said) -> list[Hit]:
    """Chinese plans: "我打算下个月去日本", "我下周五要去上海出差" (a time that resolves to the future is required)."""
    times = _chinese_times(sentence, said.ts)
    if not times:
        return []
    hits = []
    for match in _ZH_INTEND.finditer(sentence):
        pre, rest, rest_at = match.group("pre"), match.group("rest"), match.start("rest")
        if _ZH_UNSURE.search(pre):
            continue
        for t in times:  # the time may sit inside the rest ("打算下个月去日本"): it is the date, not the plan
            if rest_at <= t.start < rest_at + len(rest):
                rest = rest[:t.start - rest_at] + rest[t.end - rest_at:]
        what = _ZH_PARTICLE_TAIL.sub("", rest.lstrip("在"))
        what = what.replace("我的", f"{said.speaker}的").replace("我家", f"{said.speaker}家")
        what = _ZH_MY.sub(f"{said.speaker}的", what)  # 看我妈妈 -> 看Ana的妈妈
        if not 2 <= len(what) <= 12 or not what.startswith(_ZH_PLAN_VERBS) or _ZH_NOT_IN_PLAN.search(what) \
                or "我" in what:
            continue
        when = min(times, key=lambda t: abs(t.start - match.start("rest")))
        bare = what.replace(f"{said.speaker}的", "")
        key = object_key(_ZH_KEY_TAIL.sub("", _ZH_KEY_HEAD.sub("", bare)) or bare)
        value = f"{when.text}{what}"
        hits.append(Hit(Fact(f"plan:{key}", value, f"{said.speaker}计划{value}"), match.start(), match.end()))
    return hits
