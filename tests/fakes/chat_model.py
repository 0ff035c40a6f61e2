"""The fake server's chat model: deterministic rules that answer engram's LLM tasks from the request's own content.

It reads what a real model would (the task document of the last user message that holds one, and the
`response_format`) and derives every output from the turns, query or statements it is given: pronouns become
speakers' names, relative dates become absolute ones, facts come from first-person sentences. Nothing is keyed
to a test's inputs. `misbehave` gives the wrong answers a real model sometimes gives, derived the same way.
"""
import itertools
import json
import re
from collections.abc import Collection
from datetime import date, datetime, timedelta
from typing import Any, Literal

Misbehaviour = Literal["malformed", "wrong_schema", "foreign_ids", "junk"]
Payload = dict[str, Any]


def _words(text: str) -> frozenset[str]:
    """A set of the white-space separated words of `text`."""
    return frozenset(text.split())


MAX_STATEMENTS = 12    # these mirror shared/llm/schemas.py, which the fake does not import: it reads only requests
MAX_TEXT_CHARS = 2000
FOREIGN_ID = "t-999"

STOPWORDS = _words("""
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
IMPORTANT = re.compile(r"allerg|health|doctor|birthday|married|过敏|生日", re.IGNORECASE)
HAN = re.compile(r"[\u4e00-\u9fff]")
ADVERBS = ("really|also|just|still|always|usually|often|actually|recently|finally|already|now|currently|never|"
           "even|only|probably|definitely|sometimes|once")
PAST = _words("""was did had went got saw made took came met ate bought found left felt thought knew began ran gave
told said heard kept lost paid sent spent won wrote became brought drove flew grew chose""")
MODALS = _words("will would can could should might must may shall")
NOT_VERBS = _words("and or but nor so too as with to in at on of for from by the a an if then than that who")
JOBS = ("teacher|nurse|doctor|engineer|developer|designer|lawyer|student|chef|cook|writer|artist|programmer|"
        "accountant|manager|scientist|musician|photographer|pilot|farmer|architect|dentist|pharmacist|"
        "journalist|barista|researcher|consultant|painter|singer|baker|librarian|mechanic|electrician")
PETS = "dog|cat|puppy|kitten|parrot|rabbit|hamster|horse|turtle|fish"
NEGATION = re.compile(r"\b(?:not|never|used to|if|wish)\b|n't|[不没]|如果|希望", re.IGNORECASE)


# ---- reading the request ----------------------------------------------------------------------------------------

def text_of(content: Any) -> str:
    """A message's text, whether `content` is a string, content parts or None."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def task_document(body: Payload) -> Payload | None:
    """The last user message that is a JSON object with a `task` (repair rounds append plain-text ones)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        try:
            doc = json.loads(text_of(message.get("content")))
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("task"), str):
            return doc
    return None


def render(payload: Payload, body: Payload) -> str:
    """Bare JSON when the request constrains the format, else the fenced, chatty reply of an unconstrained model."""
    raw = json.dumps(payload, ensure_ascii=False)
    kind = (body.get("response_format") or {}).get("type")
    return raw if kind in ("json_schema", "json_object") else f"Here is the JSON:\n```json\n{raw}\n```"


def answer(body: Payload) -> str:
    """The assistant message content for an OpenAI chat-completions request body."""
    doc = task_document(body)
    if doc is None:
        last = next((text_of(m.get("content")) for m in reversed(body.get("messages") or [])
                     if m.get("role") == "user"), "")
        return f"I can only answer engram's JSON tasks, and this is not one: {last[:200]}"
    return render(solve(doc), body)


def solve(doc: Payload) -> Payload:
    """The correct answer (as a dict) to one task document."""
    task = doc["task"]
    if task not in _TASKS:
        raise ValueError(f"the fake model knows no task {task!r}")
    return _TASKS[task](doc)


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


def _other_speaker(speaker: str, turns: list[Payload], context: list[Payload]) -> str | None:
    for pool in (turns, context):
        others = {t["speaker"] for t in pool if t["speaker"] != speaker}
        if others:
            return others.pop() if len(others) == 1 else None
    return None


# ---- tasks --------------------------------------------------------------------------------------------------------

def _statement(text: str, turn: Payload, speakers: list[str], sentence: str) -> Payload:
    persons = [turn["speaker"], *[n for n in names_in(text, speakers) if n != turn["speaker"]]]
    entities: list[str] = []
    location = None
    if not is_zh(sentence):
        entities = [run for start, run in capitalised(sentence) if start > 0 and run not in speakers
                    and run not in NOT_NAMES and not run.startswith("I'") and run != "I"]
        places = re.findall(r"\b(?:in|to) ([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)", sentence)
        location = next((p for p in places if p not in speakers and p not in NOT_NAMES), None)
    else:
        place = re.search(r"(?:住在|搬到了?|去了)([^\s，。！？,.!?、了]{2,8})", sentence)
        location = place.group(1) if place else None
    return {"text": text[:MAX_TEXT_CHARS], "source_turn_ids": [turn["id"]], "persons": persons[:32],
            "entities": list(dict.fromkeys(entities))[:32], "keywords": keywords(sentence, set(speakers)),
            "location": location, "topic": None, "importance": 0.8 if IMPORTANT.search(sentence) else 0.4,
            "occurred_at": turn["time"]}


def compress(doc: Payload) -> Payload:
    """One statement per sentence of `turns` (at most 12; extra sentences join the last), never citing `context`."""
    turns, context = doc.get("turns") or [], doc.get("context") or []
    speakers = list(dict.fromkeys(t["speaker"] for t in [*turns, *context]))
    statements: list[Payload] = []
    for turn in turns:
        other = _other_speaker(turn["speaker"], turns, context)
        for sentence in sentences(turn["text"]):
            if is_greeting(sentence):
                continue
            text = restate(sentence, turn["speaker"], other, datetime.fromisoformat(turn["time"]))
            if len(statements) < MAX_STATEMENTS:
                statements.append(_statement(text, turn, speakers, sentence))
                continue
            last = statements[-1]
            last["text"] = (last["text"] + ("" if is_zh(text) else " ") + text)[:MAX_TEXT_CHARS]
            last["source_turn_ids"] = list(dict.fromkeys([*last["source_turn_ids"], turn["id"]]))[:64]
    return {"statements": statements}


def _object(rest: str) -> str:
    """The object phrase at the start of `rest`: up to punctuation or a word that starts an adjunct."""
    if is_zh(rest):
        return re.split(r"[\s，。！？,.!?、；;]", rest, maxsplit=1)[0].rstrip("了呢啊吧")
    words = re.split(r"[.,;:!?()]", rest, maxsplit=1)[0].split()
    cut = {"since", "for", "last", "next", "this", "in", "on", "at", "with", "because", "and", "but", "when", "now",
           "yesterday", "today", "tomorrow", "ago", "a", "so", "very", "too", "anymore", "every"}
    kept = words[:1] + list(itertools.takewhile(lambda w: w.lower() not in cut, words[1:]))
    return " ".join(kept)


def _slot(obj: str) -> str:
    """An attribute's object part: lower case, one line, no colon, at most 81 characters."""
    obj = re.sub(r"^(?:the|a|an|to) ", "", " ".join(obj.replace(":", " ").split()).lower())
    return obj[:81].strip()


FACT_RULES: list[tuple[str, str, str, str]] = [  # pattern, attribute, value ("{x}" = the object), text
    (r"\bI (?:currently |now )?(?:live|am living|'m living) in (?P<x>.+)", "lives_in", "{x}", "{s} lives in {x}"),
    (r"\bI (?:just |recently |have |'ve )?(?:moved|relocated) to (?P<x>.+)", "lives_in", "{x}", "{s} lives in {x}"),
    (r"\bI(?:'m| am) from (?P<x>.+)", "from", "{x}", "{s} is from {x}"),
    (r"\bI (?:currently |now )?work (?:at|for) (?P<x>.+)", "works_at", "{x}", "{s} works at {x}"),
    (rf"\bI(?:'m| am) an? (?P<x>(?:[a-z]+ ){{0,2}}(?:{JOBS}))\b", "occupation", "{x}", "{s} is a {x}"),
    (rf"\b[Mm]y (?P<k>{PETS}) (?:is called|is named|'s called|'s name is) (?P<x>[A-Z][\w-]*)", "pet:{k}", "{x}",
     "{s} has a {k} named {x}"),
    (rf"\bI have an? (?P<k>{PETS}) (?:called|named) (?P<x>[A-Z][\w-]*)", "pet:{k}", "{x}", "{s} has a {k} named {x}"),
    (r"\bI(?:'m| am) allergic to (?P<x>.+)", "allergy:{o}", "allergic", "{s} is allergic to {x}"),
    (r"\bI (?:really |also )?(?:love|like|enjoy|adore) (?P<x>.+)", "preference:{o}", "likes", "{s} likes {x}"),
    (r"\bI (?:really |also )?(?:hate|dislike) (?P<x>.+)", "preference:{o}", "dislikes", "{s} dislikes {x}"),
    (r"我(?:现在)?住在(?P<x>.+)", "lives_in", "{x}", "{s}住在{x}"),
    (r"我搬到了?(?P<x>.+)", "lives_in", "{x}", "{s}住在{x}"),
    (r"我在(?P<x>[^，。！？,.!?\s]+?)工作", "works_at", "{x}", "{s}在{x}工作"),
    (r"我是(?:一名|一位|一个)(?P<x>.+)", "occupation", "{x}", "{s}是{x}"),
    (r"我(?:很|非常|特别)?喜欢(?P<x>.+)", "preference:{o}", "likes", "{s}喜欢{x}"),
    (r"我(?:很)?讨厌(?P<x>.+)", "preference:{o}", "dislikes", "{s}讨厌{x}"),
    (r"我对(?P<x>[^，。！？,.!?\s]+?)过敏", "allergy:{o}", "allergic", "{s}对{x}过敏"),
]
PRONOUN_OBJECTS = _words("it this that them you him her these those")


def facts(doc: Payload) -> Payload:
    """Lasting first-person facts of `turns`: no questions, negations, wishes or past states."""
    found: dict[tuple[str, str, str], Payload] = {}
    for turn in doc.get("turns") or []:
        for sentence in sentences(turn["text"]):
            if sentence.endswith(("?", "？")) or NEGATION.search(sentence):
                continue
            for pattern, attribute, value, text in FACT_RULES:
                match = re.search(pattern, sentence)
                if not match:
                    continue
                x = _object(match.group("x"))
                kind = match.groupdict().get("k") or ""
                if not x or x.lower() in PRONOUN_OBJECTS or not _slot(x):
                    continue
                fact = {"subject": turn["speaker"], "attribute": attribute.format(k=kind, o=_slot(x)),
                        "value": value.format(x=x)[:300], "text": text.format(s=turn["speaker"], x=x, k=kind)[:1000],
                        "source_turn_id": turn["id"]}
                found.setdefault((fact["subject"], fact["attribute"], fact["value"]), fact)
                break
    return {"facts": list(found.values())[:MAX_STATEMENTS]}


def summary(doc: Payload) -> Payload:
    """The previous summary, then one clause per turn, cut to `max_words` (Chinese: two characters a word)."""
    turns = doc.get("turns") or []
    zh = str(doc.get("language", "")).startswith("zh") or any(is_zh(t["text"]) for t in turns)
    clauses = [str(doc.get("previous_summary") or "").strip()]
    for turn in turns:
        parts = sentences(turn["text"]) or [turn["text"]]
        first = next((s for s in parts if not is_greeting(s)), parts[0])
        other = _other_speaker(turn["speaker"], turns, [])
        text = resolve_pronouns(absolute_dates(first, datetime.fromisoformat(turn["time"])), turn["speaker"], other)
        clauses.append(f"{turn['speaker']}：{text}" if zh else f"{turn['speaker']}: {text}")
    max_words = max(int(doc.get("max_words") or 200), 1)
    if zh:
        out = "".join(c for c in clauses if c)[:max_words * 2]
    else:
        out = " ".join(" ".join(c for c in clauses if c).split()[:max_words])
    return {"summary": (out or ("（暂无内容）" if zh else "Nothing was said yet."))[:8000]}


def _query_persons(query: str, known: list[str]) -> list[str]:
    """The known names the query mentions, then its other name-like words (a model cannot tell Paris from Ana)."""
    return list(dict.fromkeys([*names_in(query, known), *guessed_names(query)]))


def _resolve_third_person(part: str, person: str) -> str:
    if is_zh(part):
        return re.sub(r"[他她](?!们)", person, part)

    def one(match: re.Match[str]) -> str:
        word, following = match.group(1).lower(), match.group(2) or ""
        possessive = word in ("his", "their") or (word == "her" and following.lower() not in STOPWORDS | {""})
        return (f"{person}'s" if possessive else person) + (f" {following}" if following else "")

    return re.sub(r"\b(she|he|her|his|him|they|them|their)\b(?: (\w+))?", one, part, flags=re.IGNORECASE)


def _sub_query(text: str, persons: list[str], now: str | None, why: str) -> Payload:
    since, until = year_range(text, now)
    words = [w for w in keywords(text, set(persons), limit=16) if not w.isdigit()]
    return {"query": text[:500], "keywords": words, "persons": persons[:8], "since": since, "until": until,
            "why": why[:300]}


def plan(doc: Payload) -> Payload:
    """The query split at its conjunctions (one sub-query a part), or whole plus one about the person it names."""
    query = str(doc["query"]).strip()
    now = doc.get("now")
    persons = _query_persons(query, list(doc.get("persons") or []))
    parts = [p.strip(" ,，") for p in re.split(r",|，| and |和|还有", query) if p.strip(" ,，?？")]
    parts = [p for p in parts if keywords(p, set(persons))]  # "Ana and Ben": names alone are no part
    zh = is_zh(query)
    if len(parts) > 1:
        parts = parts[:4]
        if len(persons) == 1:
            parts = [_resolve_third_person(p, persons[0]) for p in parts]
        queries = [_sub_query(p, persons, now, f"问题的第{i}部分" if zh else f"part {i} of the question")
                   for i, p in enumerate(parts, 1)]
        return {"queries": queries}
    queries = [_sub_query(query, persons, now, "问题本身" if zh else "the question as asked")]
    words = queries[0]["keywords"]
    if persons and words:
        focused = f"{persons[0]} {' '.join(words)}"
        if focused != query:
            queries.append(_sub_query(focused, persons[:1], now,
                                      f"关于{persons[0]}的记忆" if zh else f"what is known about {persons[0]}"))
    return {"queries": queries}


def _stems(word: str) -> set[str]:
    stems = {word}
    if word.endswith("ies") and len(word) > 4:
        stems.add(word[:-3] + "y")
    elif word.endswith("es") and len(word) > 4:
        stems |= {word[:-2], word[:-1]}
    elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        stems.add(word[:-1])
    return stems


def _mentioned(word: str, texts: list[str]) -> bool:
    if is_zh(word):
        return any(word in t for t in texts)
    return any(re.search(rf"\b{re.escape(stem)}", t) for stem in _stems(word) for t in texts)


def reflect(doc: Payload) -> Payload:
    """Sufficient when every content word of the query is in some memory; else up to 2 searches for the rest."""
    query = str(doc["query"])
    texts = [str(m.get("text", "")).lower() for m in doc.get("memories") or []]
    persons = _query_persons(query, [])
    words = [w for w in keywords(query, limit=16) if not w.isdigit()]
    searched = {" ".join(str(s).lower().split()) for s in doc.get("searched") or []}
    missing = []
    for word in [w for w in words if not _mentioned(w, texts)]:
        names = [p for p in persons if p.lower() != word]
        text = f"{word} {' '.join(names)}".strip()
        if " ".join(text.lower().split()) in searched or text.lower() == query.lower():
            continue
        missing.append(_sub_query(text, names, doc.get("now"), f"no memory found mentions {word}"))
        if len(missing) == 2:
            break
    return {"sufficient": not missing, "missing": missing}


PREDICATES: list[tuple[str, str]] = [  # pattern (group "o": the object that must match too), fact kind
    (r"\b(?:lives?|living|moved|relocated|resides?) (?:in|to)\b|住在|搬到", "lives_in"),
    (r"\bworks? (?:at|for)\b|在\S+?工作", "works_at"),
    (r"\bworks? as\b|\bis an? (?:[a-z]+ )?(?:" + JOBS + r")\b", "occupation"),
    (r"\ballergic to (?P<o>\w+)|对(?P<zo>\S+?)过敏", "allergy"),
    (r"\b(?:likes?|loves?|enjoys?|hates?|dislikes?) (?:the )?(?P<o>\w+)|(?:喜欢|讨厌)(?P<zo>\S{1,4})", "preference"),
]


def _subject(text: str) -> str | None:
    """Who a statement is about: its first name-like word, or the Han name it starts with (dates skipped)."""
    names = guessed_names(text)
    if names:
        return names[0]
    han = re.match(r"[\u4e00-\u9fff]{2,3}?(?=住在|搬到|在|对|喜欢|讨厌|是)", re.sub(r"^\d+年\d+月\d+日，?", "", text))
    return han.group(0) if han else None


def _fact_key(statement: Payload) -> tuple[str, str] | None:
    text = str(statement.get("text", ""))
    kind = str(statement.get("attribute") or "")
    before = text
    for pattern, name in [] if kind else PREDICATES:
        match = re.search(pattern, text)
        if match:
            obj = match.groupdict().get("o") or match.groupdict().get("zo") or ""
            kind, before = (f"{name}:{obj.lower()}" if obj else name), text[:match.start()]
            break
    subject = statement.get("subject") or _subject(before) or _subject(text)
    return (str(subject), kind) if subject and kind else None


def consolidate(doc: Payload) -> Payload:
    """Groups of statement ids that state the same fact (same subject and predicate) about the same person."""
    groups: dict[tuple[str, str], list[str]] = {}
    for statement in doc.get("statements") or []:
        key = _fact_key(statement)
        if key is not None:
            groups.setdefault(key, []).append(str(statement["id"]))
    return {"groups": [ids for ids in groups.values() if len(ids) > 1][:64]}


_TASKS = {"compress": compress, "facts": facts, "summary": summary, "plan": plan, "reflect": reflect,
          "consolidate": consolidate}


# ---- misbehaviour -------------------------------------------------------------------------------------------------

def _wrong_shape(task: str, payload: Payload) -> Payload:
    if task == "compress":
        return {"statements": [{k: v for k, v in s.items() if k != "source_turn_ids"} for s in payload["statements"]]
                or [{"text": "nothing"}]}
    if task == "facts":
        return {"facts": [{k: v for k, v in f.items() if k != "source_turn_id"} for f in payload["facts"]]
                or [{"subject": "nobody"}]}
    if task == "reflect":
        return {"enough": payload["sufficient"], "missing": payload["missing"]}
    if task == "consolidate":
        return {"groups": {"same": payload["groups"]}}
    return {"items": next(iter(payload.values()))}


def _foreign_ids(payload: Payload) -> Payload:
    for i, item in enumerate(payload.get("statements", [])):
        item["source_turn_ids"] = [f"{FOREIGN_ID}{'-' + str(i) if i else ''}"]
    for fact in payload.get("facts", []):
        fact["source_turn_id"] = FOREIGN_ID
    if "groups" in payload:
        payload["groups"] = [[f"s-999-{i}-{j}" for j in range(len(g))] for i, g in enumerate(payload["groups"])]
    return payload


def misbehave(body: Payload, how: Misbehaviour) -> str:
    """A wrong answer of the kind `how` names, derived from the request like the right one would be.

    malformed: the JSON cut off mid-way; wrong_schema: valid JSON of the wrong shape; foreign_ids: the right answer
    citing ids that are not in the request; junk: a sentence of prose, no JSON.
    """
    doc = task_document(body)
    task = str(doc["task"]) if doc else "chat"
    if how == "junk":
        doc = doc or {}
        speakers = " and ".join(dict.fromkeys(t["speaker"] for t in doc.get("turns") or []))
        about = f"what {speakers} said" if speakers else f"the question {str(doc.get('query', ''))[:200]!r}"
        return re.sub(r"[{}\[\]]", "", f"Sure! I have read {about} and I am happy to help with the {task} task.")
    payload = solve(doc) if doc else {"reply": "nothing"}
    if how == "malformed":
        raw = json.dumps(payload, ensure_ascii=False)
        first_text = re.search(r'"text": "((?:[^"\\]|\\.)*)"', raw)  # cut mid-way through the first text, if any
        cut = first_text.start(1) + max(3, len(first_text.group(1)) // 2) if first_text else max(1, len(raw) // 2)
        kind = (body.get("response_format") or {}).get("type")
        return raw[:cut] if kind in ("json_schema", "json_object") else f"Here is the JSON:\n```json\n{raw[:cut]}"
    if how == "wrong_schema":
        return render(_wrong_shape(task, payload), body)
    if how == "foreign_ids":
        return render(_foreign_ids(payload), body)
    raise ValueError(f"unknown misbehaviour {how!r}; use one of malformed, wrong_schema, foreign_ids, junk")
