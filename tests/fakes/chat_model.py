"""The fake server's chat model: deterministic rules that answer engram's LLM tasks from the request's own content.

It reads what a real model would (the task document of the last user message that holds one, and the
`response_format`) and derives every output from the turns, query or statements it is given: pronouns become
speakers' names, relative dates become absolute ones, facts come from first-person sentences. Nothing is keyed
to a test's inputs. `misbehave` gives the wrong answers a real model sometimes gives, derived the same way.
The solvers live in `chat_tasks`, the text rules they share in `chat_text`.
"""
import json
import re
from typing import Any, Literal

from tests.fakes.chat_tasks import Payload, compress, consolidate, facts, plan, reflect, summary
from tests.fakes.chat_text import HAN

__all__ = ["FOREIGN_ID", "HAN", "Misbehaviour", "Payload", "answer", "misbehave", "render", "solve", "task_document",
           "text_of"]

Misbehaviour = Literal["malformed", "wrong_schema", "foreign_ids", "junk"]
FOREIGN_ID = "t-999"


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
