"""What the model is told, per purpose: fixed instructions (system message) and the task's data as one JSON
document (user message) whose `task` field names the purpose, so any model, and the test suite's fake, reads
the same request."""
import json
from datetime import datetime
from typing import Any

from engram_client.contract import Turn
from shared.llm.schemas import MAX_STATEMENTS, MAX_SUB_QUERIES, Purpose

_COMMON = ("You are the memory compressor of a chat product. Answer with one JSON object and nothing else. "
           "Never invent anything the input does not say.")

INSTRUCTIONS: dict[Purpose, str] = {
    "compress": f"""{_COMMON}
Task: restate the turns of `turns` as at most {MAX_STATEMENTS} self-contained statements for long-term memory.
- Each statement must be understandable alone, years later: replace every pronoun (I, you, she, we, it, this,
  我, 你, 他...) with the name it stands for, and every relative time (yesterday, last week, next month, 昨天...)
  with the absolute date, computed from the turn's `time`.
- Lossless: every fact, name, number, place, date, plan, feeling and preference in the turns appears in some
  statement. Drop greetings and filler only.
- Write in the language of the turns (`language`); Chinese turns give Chinese statements.
- `source_turn_ids`: the ids of the turns each statement restates, only ids from `turns` (never from `context`,
  which is earlier conversation shown for reference).
- `persons`: people named; `entities`: other proper names (places, companies, titles); `keywords`: up to 8
  content words; `location`, `topic`: one short phrase or null; `importance`: 0 (small talk) to 1 (health,
  identity, lasting preferences, commitments); `occurred_at`: ISO 8601 time the statement's event happened if
  the turns say, else null.
Reply: {{"statements": [{{"text": ..., "source_turn_ids": [...], "persons": [...], "entities": [...],
"keywords": [...], "location": null, "topic": null, "importance": 0.5, "occurred_at": null}}]}}""",
    "facts": f"""{_COMMON}
Task: list the lasting facts the speakers of `turns` state about themselves (at most {MAX_STATEMENTS}).
- Only first-hand statements that are true now: not questions, wishes, hypotheticals, negations or past states.
- `subject`: the speaker's name; `attribute`: one of lives_in, from, works_at, occupation, studies, partner,
  birthday, diet, family:<relation>:<name>, pet:<species>, preference:<object>, favourite:<kind>,
  allergy:<substance>, plan:<short object>: the attribute names in lower case English, the <object> and <kind> in
  lower case, in the language of the turn (allergy:peanut, allergy:花生, favourite:band, favourite:乐队); `value`:
  the value in the turn's language (for preference: likes or dislikes; for allergy: allergic; for favourite: what
  the favourite is, one per kind); `text`: one sentence stating the fact with the
  subject's name, in the turn's language; `source_turn_id`: the id of the turn that states it.
Reply: {{"facts": [{{"subject": ..., "attribute": ..., "value": ..., "text": ..., "source_turn_id": ...}}]}}""",
    "summary": f"""{_COMMON}
Task: write a running summary of a conversation for the assistant to read before the recent turns.
Fold the new `turns` into `previous_summary` (empty at first): keep every name, decision, open question, plan,
preference and date (absolute dates, no pronouns without their name), drop small talk. Write in the
conversation's `language`, in at most `max_words` words.
Reply: {{"summary": ...}}""",
    "plan": f"""{_COMMON}
Task: plan the searches of a long-term memory that answer `query` (asked at `now`, about the people in it).
Give 1 to {MAX_SUB_QUERIES} targeted sub-queries, each a short search phrase in the query's language, with the
`keywords` that must appear, the `persons` it concerns, and `since`/`until` (ISO 8601) only when the query
names a time. A multi-part or comparative question gets one sub-query per part.
Reply: {{"queries": [{{"query": ..., "keywords": [...], "persons": [...], "since": null, "until": null,
"why": ...}}]}}""",
    "reflect": f"""{_COMMON}
Task: decide whether `memories` are enough to answer `query`. If they are, reply sufficient=true. If not,
give up to {MAX_SUB_QUERIES} new sub-queries for what is missing (not ones already in `searched`).
Reply: {{"sufficient": true|false, "missing": [{{"query": ..., "keywords": [...], "persons": [...],
"since": null, "until": null, "why": ...}}]}}""",
    "consolidate": f"""{_COMMON}
Task: group the `statements` that state the same fact about the same person, possibly with a different or
updated value (where someone lives, works, what they like...). Statements about different facts stay apart.
Do not decide which is true. Give each group as a list of statement ids; leave out statements that are alone.
Reply: {{"groups": [["id", "id"], ...]}}""",
}


def turn_json(turn: Turn) -> dict[str, Any]:
    """A turn as the model sees it."""
    return {"id": turn.turn_id, "speaker": turn.speaker, "role": turn.role, "time": turn.ts.isoformat(),
            "text": turn.text}


def document(purpose: Purpose, **data: Any) -> str:
    """The user message: the task's data as JSON, led by the purpose."""
    def encode(value: Any) -> Any:
        if isinstance(value, datetime):
            return value.isoformat()
        raise TypeError(f"cannot encode {type(value).__name__}")

    return json.dumps({"task": purpose, **data}, ensure_ascii=False, default=encode)


def messages(purpose: Purpose, user: str, schema_hint: str | None = None) -> list[dict[str, str]]:
    """System and user messages; `schema_hint` (the JSON schema) is added when the server cannot enforce it."""
    system = INSTRUCTIONS[purpose]
    if schema_hint:
        system += f"\nThe reply must validate against this JSON schema:\n{schema_hint}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
