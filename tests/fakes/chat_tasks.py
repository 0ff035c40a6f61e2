"""The fake chat model's solvers, one per engram task: compress, facts, summary, plan, reflect, consolidate."""
import itertools
import re
from datetime import datetime
from typing import Any

from tests.fakes.chat_text import (
    NOT_NAMES,
    STOPWORDS,
    absolute_dates,
    capitalised,
    guessed_names,
    is_greeting,
    is_zh,
    keywords,
    names_in,
    resolve_pronouns,
    restate,
    sentences,
    word_set,
    year_range,
)

Payload = dict[str, Any]

MAX_STATEMENTS = 12    # these mirror shared/llm/schemas.py, which the fake does not import: it reads only requests
MAX_TEXT_CHARS = 2000
IMPORTANT = re.compile(r"allerg|health|doctor|birthday|married|过敏|生日", re.IGNORECASE)
JOBS = ("teacher|nurse|doctor|engineer|developer|designer|lawyer|student|chef|cook|writer|artist|programmer|"
        "accountant|manager|scientist|musician|photographer|pilot|farmer|architect|dentist|pharmacist|"
        "journalist|barista|researcher|consultant|painter|singer|baker|librarian|mechanic|electrician")
PETS = "dog|cat|puppy|kitten|parrot|rabbit|hamster|horse|turtle|fish"
NEGATION = re.compile(r"\b(?:not|never|used to|if|wish)\b|n't|[不没]|如果|希望", re.IGNORECASE)


def _other_speaker(speaker: str, turns: list[Payload], context: list[Payload]) -> str | None:
    for pool in (turns, context):
        others = {t["speaker"] for t in pool if t["speaker"] != speaker}
        if others:
            return others.pop() if len(others) == 1 else None
    return None


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
    (r"\b[Mm]y (?:new |current )?favou?rite (?P<k>[a-z]+) is (?:now )?(?!probably|maybe|not\b)(?P<x>.+)",
     "favourite:{k}", "{x}", "{s}'s favourite {k} is {x}"),
    (r"\bI (?:really |also )?(?:love|like|enjoy|adore) (?P<x>.+)", "preference:{o}", "likes", "{s} likes {x}"),
    (r"\bI (?:really |also )?(?:hate|dislike) (?P<x>.+)", "preference:{o}", "dislikes", "{s} dislikes {x}"),
    (r"我(?:现在)?住在(?P<x>.+)", "lives_in", "{x}", "{s}住在{x}"),
    (r"我搬到了?(?P<x>.+)", "lives_in", "{x}", "{s}住在{x}"),
    (r"我在(?P<x>[^，。！？,.!?\s]+?)工作", "works_at", "{x}", "{s}在{x}工作"),
    (r"我是(?:一名|一位|一个)(?P<x>.+)", "occupation", "{x}", "{s}是{x}"),
    (r"我(?:现在)?最(?:喜欢|爱)的(?P<k>(?:(?!不|没|可能|应该|是)[\u4e00-\u9fff]){1,4}?)(?:是|换成了?)(?P<x>[^了，。！？,.!?\s]+)",
     "favourite:{k}", "{x}", "{s}最喜欢的{k}是{x}"),
    (r"我(?:很|非常|特别)?喜欢(?P<x>.+)", "preference:{o}", "likes", "{s}喜欢{x}"),
    (r"我(?:很)?讨厌(?P<x>.+)", "preference:{o}", "dislikes", "{s}讨厌{x}"),
    (r"我对(?P<x>[^，。！？,.!?\s]+?)过敏", "allergy:{o}", "allergic", "{s}对{x}过敏"),
]
PRONOUN_OBJECTS = word_set("it this that them you him her these those")
FAVOURITE_KINDS = {"color": "colour", "film": "movie", "novel": "book", "writer": "author"}  # as the prompt's kinds


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
                said_kind = match.groupdict().get("k") or ""
                kind = FAVOURITE_KINDS.get(said_kind, said_kind)
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
