"""Rules for statements that end or replace a slot's value in the way people say it in passing.

The slot rules read how a state is stated ("I live in Porto", "I work at Google"). People more often say how it
changed: "Lisa and I broke up", "I've been seeing Jana since September", "I'm no longer vegetarian", "I handed in
my notice at Siemens", "I start at Bosch on Monday", "我不吃素了", "下周一去米哈游报到", "我已经离职了". Each becomes
a fact of the same slot (partner, diet, works_at), so the newest statement supersedes the older ones by time, as
any other; an ending has a value that says so ("no partner", "not vegetarian", "left Siemens"). Written and widened
against the dev half of the update stories (sentences their author wrote without seeing these rules); precision
first: first person only, and the reader's guards (questions, wishes, reports, the past) still apply.
"""
from shared.compress.extract import STOPWORDS
from shared.compress.facts.chinese_life import employer
from shared.compress.facts.fact import Fact, Hit, Said
from shared.compress.facts.han import is_place
from shared.compress.facts.han import name as han_name
from shared.compress.facts.life import ADV, ME
from shared.compress.facts.phrases import CAP_RUN, PERSON_NAME, clean_name
from shared.compress.facts.vocabulary import NOT_NAMES
from shared.text import patterns

_NAME = r"(?P<name>" + PERSON_NAME + ")"
_ORG = r"(?P<org>" + CAP_RUN + ")"
# A breakup ends a clause: "Tom and I split up the work" and "we split up at the mall" are no breakup.
_BREAKUP_END = r"(?=\s*+(?:$|[.,!;:)]|[-–—]|(?:in|last|over|a|two|three|after|because|this|earlier|recently|and|but|"\
    r"so|lol|haha)\b))"
_BROKE_UP = patterns.compile(
    r"(?:\b(?P<with>[A-Z][a-z]++) and I|" + ME + r")(?:'ve| have)? " + ADV
    + r"(?:broke up|split up|got divorced|divorced)(?: with " + _NAME + r")?" + _BREAKUP_END)
# The values of endings, written here and read back by `ending`: "no partner", "not vegetarian", "left Siemens",
# "不吃素", "从腾讯离职" / "已离职".
NO_PARTNER = "no partner"
NOT = "not "
LEFT = "left "
ZH_NOT_VEGETARIAN = "不吃素"
ZH_LEFT = "离职"
# Dating, not meeting: "I'm seeing Anna for lunch" is no partner.
_SEEING = patterns.compile(ME + r"(?:(?:'ve| have) " + ADV + r"been (?:seeing|dating)|(?:'m| am) " + ADV
                           + r"(?:dating|going out with)|(?: " + ADV + r")?(?:started|began) "
                           r"(?:seeing|dating|going out with)) " + _NAME + r"\b")
_NEW_PARTNER = patterns.compile(r"\b[Mm]y new (?P<rel>girlfriend|boyfriend|wife|husband)(?:,)? " + _NAME + r"\b")
_DIETS = r"(?P<diet>vegetarian|vegan|pescatarian|pescetarian|keto|plant-based)"
# An ending, not a plain "I'm not vegan" (which says nothing changed).
_NOT_DIET = [
    patterns.compile(ME + r"(?:'m| am) no longer (?:a |really )?" + _DIETS + r"\b"),
    patterns.compile(ME + r"(?:'m| am) not (?:a |really )?" + _DIETS + r" any ?more\b"),
    patterns.compile(ME + r"(?:'ve| have)? " + ADV + r"(?:stopped|quit|gave up|given up) being (?:a )?" + _DIETS
                     + r"\b"),
]
_MEAT_AGAIN = patterns.compile(ME + r"(?:'ve| have|'m| am)? " + ADV + r"(?:started |been |back to )?eat(?:ing)? "
                               r"(?:meat|fish|chicken|beef|pork) again\b")
_LEFT_JOB = patterns.compile(ME + r"(?:'ve| have)? " + ADV + r"(?:handed in|gave|given|put in|turned in) (?:my )?"
                             r"(?:notice|resignation) at " + _ORG + r"|" + ME + r"(?:'ve| have)? " + ADV
                             + r"(?:quit|left) my job at " + _ORG.replace("org", "org2") + r"|" + ME
                             + r"(?:'ve| have)? " + ADV + r"resigned from " + _ORG.replace("org", "org3"))
# "I start at Bosch", "... and start at Bosch" (the clause's subject is the sentence's "I"), "my first week at X"
# or a sentence opening "first week at X done!"; never a first day that "was" years ago.
_STARTS_JOB = patterns.compile(r"(?:" + ME + r"(?:'ll|'m| am| will)?|\b(?P<and>and|then)) " + ADV
                               + r"(?:start|starting|begin|beginning) "
                               r"(?:work |working |my new job |the new job )?at " + _ORG + r"\b"
                               r"|(?:\b[Mm]y |^)first (?:day|week|month) (?:of work )?at " + _ORG.replace("org", "org2")
                               + r"\b(?! (?:as a guest|as a visitor|was|back))")
# Anchored: one attempt, and what its runs take is never tried again another way (no word starts with \\W, I is none).
_OPENS_WITH_I = patterns.compile(r"^\W*+(?:(?:so|and|but|ok|okay|well|also|anyway|btw|yeah|hey)\W++)*+I\b",
                                 patterns.IGNORECASE)
_NOT_EMPLOYERS = frozenset({"Home", "Work", "School", "Night", "Church", "Monday", "Tuesday", "Wednesday",
                            "Thursday", "Friday", "Saturday", "Sunday"})

# Chinese
_ZH_BROKE_UP = patterns.compile(r"我(?:们|(?:和|跟)(?P<with>[\u4e00-\u9fff]{1,4}))?(?:已经|终于|上个月|上周|前阵子)?"
                                r"(?:分手|离婚)了")
# Someone else between the speaker's 我 and the verb makes it theirs: "我弟弟下周去腾讯报到".
_ZH_SOMEONE = patterns.compile(r"[他她]|弟弟|妹妹|哥哥|姐姐|老公|老婆|同事|朋友|儿子|女儿|爸|妈")
_ZH_NOT_VEGETARIAN = patterns.compile(r"我(?:现在|已经)?(?:不吃素了|不再吃素|开始吃肉了|又吃肉了|开荤了|不是素食者了)")
_ZH_JOIN = patterns.compile(r"(?:去|到|在)(?P<org>[\u4e00-\u9fffA-Za-z0-9&]{2,8}?)(?:报到|入职)|入职(?:了)?(?P<org2>"
                            r"[\u4e00-\u9fffA-Za-z0-9&]{2,8}?)(?=[，。！,.!~～]|$|了)")
_ZH_COUNT = patterns.compile(r"[0-9一二两俩三四五六七八九十几多半][个天周月年]|[天周月年]")
_ZH_GENERIC = frozenset({"学校", "公司", "医院", "单位", "新公司", "那边", "这边", "部门", "学院", "大学"})
_ZH_LEFT = patterns.compile(r"我(?:已经|刚|终于)?(?:从(?P<org>[\u4e00-\u9fffA-Za-z0-9&]{2,8}?))?(?:辞职|离职)了"
                            r"|我(?:已经|刚)?递了辞呈")


def _person(raw: str | None) -> str | None:
    found = clean_name(raw) if raw else None
    return found if found and found.split()[0] not in NOT_NAMES and found.lower() not in STOPWORDS else None


def ending(attribute: str | None, value: str | None) -> bool:
    """Whether a fact these rules made says its slot's value stopped ("no partner", "not vegetarian", "left Siemens",
    "不吃素", "从腾讯离职"): what no longer holds, not what does, so a profile of current facts leaves it out (a new
    partner or job said in words no rule reads would leave it standing as the person's state)."""
    if value is None:
        return False
    return ((attribute == "partner" and value == NO_PARTNER)
            or (attribute == "diet" and (value.startswith(NOT) or value == ZH_NOT_VEGETARIAN))
            or (attribute == "works_at" and (value.startswith(LEFT) or value.endswith(ZH_LEFT))))


def english(sentence: str, said: Said) -> list[Hit]:
    """Partner, diet and employer changes said in passing, in English."""
    hits = []
    for match in _BROKE_UP.finditer(sentence):
        if match.group("with") and _person(match.group("with")) is None:
            continue  # "If I and ..." / "So I and ...": not a name
        other = _person(match.group("with")) or _person(match.group("name"))
        text = f"{said.speaker} broke up with {other}" if other else f"{said.speaker} is no longer with their partner"
        hits.append(Hit(Fact("partner", NO_PARTNER, text, (other,) if other else (), (other,) if other else ()),
                        match.start(), match.end()))
    for pattern in (_SEEING, _NEW_PARTNER):
        for match in pattern.finditer(sentence):
            other = _person(match.group("name"))
            if other:
                hits.append(Hit(Fact("partner", other, f"{said.speaker} is seeing {other}", (other,), (other,)),
                                match.start(), match.end()))
    for pattern in _NOT_DIET:
        for match in pattern.finditer(sentence):
            diet = match.group("diet").lower().replace("pescetarian", "pescatarian").replace("plant-based", "vegan")
            hits.append(Hit(Fact("diet", f"{NOT}{diet}", f"{said.speaker} is no longer {diet}"),
                            match.start(), match.end()))
    for match in _MEAT_AGAIN.finditer(sentence):
        hits.append(Hit(Fact("diet", "eats meat", f"{said.speaker} eats meat again"), match.start(), match.end()))
    for match in _LEFT_JOB.finditer(sentence):
        org = clean_name(match.group("org") or match.group("org2") or match.group("org3") or "")
        if org and org not in _NOT_EMPLOYERS:
            hits.append(Hit(Fact("works_at", f"{LEFT}{org}", f"{said.speaker} left {org}", entities=(org,)),
                            match.start(), match.end()))
    for match in _STARTS_JOB.finditer(sentence):
        if match.group("and") and not _OPENS_WITH_I.match(sentence):
            continue  # "My brother quit and starts at Google": not the speaker
        org = clean_name(match.group("org") or match.group("org2") or "")
        if org and org not in _NOT_EMPLOYERS:
            hits.append(Hit(Fact("works_at", org, f"{said.speaker} works at {org}", entities=(org,)),
                            match.start(), match.end()))
    return hits


def chinese(sentence: str, said: Said) -> list[Hit]:
    """Partner, diet and employer changes said in passing, in Chinese."""
    hits = []
    for match in _ZH_BROKE_UP.finditer(sentence):
        other = han_name(match.group("with")) if match.group("with") else None
        text = f"{said.speaker}和{other}分手了" if other else f"{said.speaker}已经没有伴侣了"
        hits.append(Hit(Fact("partner", NO_PARTNER, text, (other,) if other else (), (other,) if other else ()),
                        match.start(), match.end()))
    for match in _ZH_NOT_VEGETARIAN.finditer(sentence):
        hits.append(Hit(Fact("diet", ZH_NOT_VEGETARIAN, f"{said.speaker}不再吃素了"), match.start(), match.end()))
    for match in _ZH_JOIN.finditer(sentence):
        before = sentence[:match.start()]
        if "我" not in before or _ZH_SOMEONE.search(before[before.rfind("我"):]):
            continue
        org = match.group("org") or match.group("org2")
        # "去米哈游报到" names an employer by the verb; "入职俩多月了" does not, so after 入职 only a known one counts.
        loose = match.group("org") is not None and org not in _ZH_GENERIC and not is_place(org) \
            and not org.startswith(("这", "那", "哪", "一", "新", "我", "你")) and not _ZH_COUNT.search(org)
        if org and (employer(org) or loose):
            hits.append(Hit(Fact("works_at", org, f"{said.speaker}在{org}工作", entities=(org,)),
                            match.start(), match.end()))
    for match in _ZH_LEFT.finditer(sentence):
        org = match.group("org")
        value = f"从{org}{ZH_LEFT}" if org else f"已{ZH_LEFT}"
        hits.append(Hit(Fact("works_at", value, f"{said.speaker}{value}了", entities=(org,) if org else ()),
                        match.start(), match.end()))
    return hits
