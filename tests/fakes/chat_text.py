"""Text rules of the fake chat model: sentences, keywords, names, absolute dates, pronouns resolved to names."""
import re
from collections.abc import Collection
from datetime import date, datetime, timedelta


def word_set(text: str) -> frozenset[str]:
    """A set of the white-space separated words of `text`."""
    return frozenset(text.split())


STOPWORDS = word_set("""
a about after again all also am an and any are as at be been before being but by can could did do does doing
done during each few for from get got had has have having he her here hers him his how i if in into is it its
just let like me more most my no nor not now of off on once only or other our out over own really same she
should so some still such than that the their them then there these they this those through to too under until
up us very was we were what when where which while who whom why will with would you your yours
yesterday today tomorrow tonight week month year last next ago
""")
ZH_STOP_WORDS = ("什么", "哪里", "哪儿", "为什么", "怎么", "时候", "多少", "我们", "你们", "他们", "她们",
                 "昨天", "今天", "明天", "上周", "下周", "上个月", "下个月", "去年", "今年", "明年")
ZH_PARTICLES = frozenset("的了是在吗呢吧啊很也都和就还我你他她它们这那个一有说么对过到去被把给跟从让吃")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
NOT_NAMES = frozenset({*MONTHS, "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"})
GREETINGS = frozenset({"hi", "hello", "hey", "thanks", "thank", "bye", "goodbye", "ok", "okay", "你好", "谢谢",
                       "再见", "嗨", "好的"})
HAN = re.compile(r"[\u4e00-\u9fff]")
ADVERBS = ("really|also|just|still|always|usually|often|actually|recently|finally|already|now|currently|never|"
           "even|only|probably|definitely|sometimes|once")
PAST = word_set("""was did had went got saw made took came met ate bought found left felt thought knew began ran gave
told said heard kept lost paid sent spent won wrote became brought drove flew grew chose""")
MODALS = word_set("will would can could should might must may shall")
NOT_VERBS = word_set("and or but nor so too as with to in at on of for from by the a an if then than that who")


# ---- text helpers -------------------------------------------------------------------------------------------------

def is_zh(text: str) -> bool:
    """Whether the text has Han characters (is treated as Chinese)."""
    return bool(HAN.search(text))


def sentences(text: str) -> list[str]:
    """The text's sentences (Chinese end marks split without a following space)."""
    parts = re.split(r"(?<=[。！？])\s*|(?<=[.!?])\s+", text.replace("’", "'"))
    return [p.strip() for p in parts if p and p.strip()]


def is_greeting(sentence: str) -> bool:
    """A greeting or thanks with at most two more words: filler a compression drops."""
    bare = re.sub(r"[^\w\s]", " ", sentence).lower().split()
    return bool(bare) and (bare[0] in GREETINGS or sentence.strip("！!。. ") in GREETINGS) and len(bare) <= 3


def keywords(text: str, names: Collection[str] = (), limit: int = 8) -> list[str]:
    """Up to `limit` content words: lowercase English words without stopwords, or 2-4 character Han chunks."""
    lowered = {n.lower() for n in names}
    found: list[str] = []
    if is_zh(text):
        for name in names:
            text = text.replace(name, " ")
        for word in ZH_STOP_WORDS:
            text = text.replace(word, " ")
        text = "".join(" " if ch in ZH_PARTICLES else ch for ch in text)
        for run in re.findall(r"[\u4e00-\u9fff]{2,}", text):
            found += [run] if len(run) <= 4 else [run[i:i + 2] for i in range(0, len(run) - 1, 2)]
    found += [w for w in re.findall(r"[a-z][a-z'-]+", text.lower())
              if w not in STOPWORDS and w not in lowered and len(w) > 2 and "'" not in w]
    return list(dict.fromkeys(found))[:limit]


def capitalised(text: str) -> list[tuple[int, str]]:
    """Runs of capitalised words with their start offsets, possessive 's dropped."""
    return [(m.start(), re.sub(r"'s$", "", m.group(0)))
            for m in re.finditer(r"\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*", text)]


def names_in(text: str, known: list[str]) -> list[str]:
    """The known names the text mentions."""
    return [n for n in known
            if (n in text if is_zh(n) else re.search(rf"(?<![A-Za-z]){re.escape(n)}(?![A-Za-z])", text))]


def guessed_names(text: str) -> list[str]:
    """Capitalised words that look like people's names (not question words, stopwords, months or days)."""
    words = re.findall(r"(?<![A-Za-z])[A-Z][a-z]+(?:'s)?(?![A-Za-z])", text)
    out = [re.sub(r"'s$", "", w) for w in words]
    return list(dict.fromkeys(w for w in out if w.lower() not in STOPWORDS and w not in NOT_NAMES))


def year_range(text: str, now: str | None) -> tuple[str | None, str | None]:
    """The ISO start and end of a year the text names ("2023", "last year", "去年"), if any."""
    match = re.search(r"(?<!\d)((?:19|20)\d{2})(?!\d)", text)
    year = int(match.group(1)) if match else None
    if year is None and now:
        this = datetime.fromisoformat(now).year
        offsets = {"last year": -1, "this year": 0, "去年": -1, "今年": 0}
        year = next((this + off for word, off in offsets.items() if word in text.lower()), None)
    if year is None:
        return None, None
    return f"{year}-01-01T00:00:00+00:00", f"{year}-12-31T23:59:59+00:00"


# ---- restating a turn: dates and pronouns -------------------------------------------------------------------------

def _month_shift(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def absolute_dates(text: str, when: datetime) -> str:
    """Relative dates replaced by absolute ones computed from `when` (English and Chinese)."""
    today = when.date()

    def week_of(day: date) -> date:
        return day - timedelta(days=day.weekday())

    def zh_day(day: date) -> str:
        return f"{day.year}年{day.month}月{day.day}日"

    zh = {"前天": zh_day(today - timedelta(days=2)), "昨天": zh_day(today - timedelta(days=1)), "今天": zh_day(today),
          "明天": zh_day(today + timedelta(days=1)), "后天": zh_day(today + timedelta(days=2)),
          "上个星期": zh_day(week_of(today - timedelta(days=7))) + "那一周",
          "下个星期": zh_day(week_of(today + timedelta(days=7))) + "那一周",
          "上星期": zh_day(week_of(today - timedelta(days=7))) + "那一周",
          "下星期": zh_day(week_of(today + timedelta(days=7))) + "那一周",
          "上周": zh_day(week_of(today - timedelta(days=7))) + "那一周",
          "下周": zh_day(week_of(today + timedelta(days=7))) + "那一周",
          "上个月": f"{_month_shift(today, -1).year}年{_month_shift(today, -1).month}月",
          "下个月": f"{_month_shift(today, 1).year}年{_month_shift(today, 1).month}月",
          "去年": f"{today.year - 1}年", "今年": f"{today.year}年", "明年": f"{today.year + 1}年"}
    for word, value in zh.items():
        text = text.replace(word, value)

    def month_name(day: date) -> str:
        return f"{MONTHS[day.month - 1]} {day.year}"

    en = {"yesterday": ("on", (today - timedelta(days=1)).isoformat()), "today": ("on", today.isoformat()),
          "tomorrow": ("on", (today + timedelta(days=1)).isoformat()),
          "tonight": ("on the night of", today.isoformat()),
          "last week": ("in the week of", week_of(today - timedelta(days=7)).isoformat()),
          "next week": ("in the week of", week_of(today + timedelta(days=7)).isoformat()),
          "last month": ("in", month_name(_month_shift(today, -1))),
          "next month": ("in", month_name(_month_shift(today, 1))),
          "last year": ("in", str(today.year - 1)), "next year": ("in", str(today.year + 1))}

    def replace(match: re.Match[str]) -> str:
        before, phrase = match.group(1), match.group(2)
        preposition, value = en[phrase.lower()]
        out = f"{before}{value}" if before else f"{preposition} {value}"
        return out[0].upper() + out[1:] if phrase[0].isupper() and not before else out

    pattern = r"\b((?:since|until|from|by|before|after) )?(" + "|".join(en) + r")\b"
    text = re.sub(pattern, replace, text, flags=re.IGNORECASE)

    def ago(match: re.Match[str]) -> str:
        numbers = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
        n = int(match.group(1)) if match.group(1).isdigit() else numbers[match.group(1).lower()]
        days = n * (7 if match.group(2).lower() == "week" else 1)
        return f"on {(today - timedelta(days=days)).isoformat()}"

    return re.sub(r"\b(\d+|a|one|two|three|four|five) (day|week)s? ago\b", ago, text, flags=re.IGNORECASE)


def _third_person(verb: str) -> str:
    special = {"have": "has", "do": "does", "go": "goes", "don't": "doesn't", "haven't": "hasn't"}
    if verb in special:
        return special[verb]
    if verb in PAST or verb in MODALS or verb in NOT_VERBS or verb.endswith(("ed", "'t")):
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def resolve_pronouns(text: str, speaker: str, other: str | None) -> str:
    """First-person pronouns become the speaker, second-person (and 'we') the one other speaker if there is one."""
    if is_zh(text):
        def zh(match: re.Match[str]) -> str:
            word = match.group(0)
            if word.startswith("我"):
                if word in ("我们", "咱们"):
                    return f"{speaker}和{other}" if other else word
                return speaker + word[1:]
            return other + word[1:] if other else word

        return re.sub(r"我们|咱们|我的|我|你的|您的|你(?!们)|您", zh, text)

    def aux(word: str) -> str:
        return {"are": "is", "do": "does", "have": "has", "were": "was"}.get(word.lower(), word.lower())

    def en(match: re.Match[str]) -> str:
        groups = match.groupdict()
        if groups["inv"] and other:
            return f"{aux(groups['inv'])} {other}"
        if groups["iverb"]:
            adverb = f"{groups['iadv']} " if groups["iadv"] else ""
            return f"{speaker} {adverb}{_third_person(groups['iverb'].lower())}"
        word = match.group(0).lower()
        mine = {"i'm": f"{speaker} is", "i am": f"{speaker} is", "i've": f"{speaker} has", "i'll": f"{speaker} will",
                "i'd": f"{speaker} would", "i": speaker, "me": speaker, "myself": speaker, "my": f"{speaker}'s",
                "mine": f"{speaker}'s"}
        if word in mine:
            return mine[word]
        if other is None:
            return match.group(0)
        both = f"{speaker} and {other}"
        yours = {"you're": f"{other} is", "you are": f"{other} is", "you've": f"{other} has",
                 "you'll": f"{other} will", "you'd": f"{other} would", "you have": f"{other} has",
                 "you do": f"{other} does", "you were": f"{other} was", "yours": f"{other}'s",
                 "your": f"{other}'s", "yourself": other, "you": other, "we're": f"{both} are",
                 "we are": f"{both} are", "we've": f"{both} have", "we'll": f"{both} will", "we": both,
                 "us": both, "our": f"{both}'s", "ours": f"{both}'s"}
        return yours.get(word, match.group(0))

    pattern = (rf"\b(?P<inv>are|do|have|were|did|can|will|would) you\b"
               r"|\bi(?:'m| am|'ve|'ll|'d)\b"
               rf"|\bI (?:(?P<iadv>{ADVERBS}) )?(?P<iverb>(?!was\b|am\b)[a-z]+(?:'t)?)\b"
               r"|\b(?:i|me|myself|my|mine)\b"
               r"|\byou(?:'re| are|'ve|'ll|'d| have| do| were)\b|\b(?:yours|your|yourself|you)\b"
               r"|\bwe(?:'re| are|'ve|'ll)\b|\b(?:we|our|ours)\b|\b(?-i:us)\b")
    return re.sub(pattern, en, text, flags=re.IGNORECASE)


def restate(sentence: str, speaker: str, other: str | None, when: datetime) -> str:
    """One sentence made self-contained: absolute dates, names for pronouns, the speaker named."""
    text = resolve_pronouns(absolute_dates(sentence, when), speaker, other)
    if speaker not in text:
        text = f"{speaker}说：{text}" if is_zh(text) else f"{speaker} said: {text}"
    return text
