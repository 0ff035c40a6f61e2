"""The fake chat model answers engram's tasks from their content, and the fake server's knobs misbehave on demand."""
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import openai
import pytest
from pydantic import BaseModel, ValidationError

from engram_client.contract import Turn
from shared.llm import prompts
from shared.llm.schemas import (
    PURPOSES,
    CompressedWindow,
    ExtractedFacts,
    Purpose,
    Reflection,
    SameFactGroups,
    SearchPlan,
    Summary,
)
from shared.text import tokens
from tests.fakes import chat_model
from tests.fakes.openai_server import FakeOpenAI, serve

SCHEMAS: dict[Purpose, type[BaseModel]] = {"compress": CompressedWindow, "facts": ExtractedFacts, "summary": Summary,
                                           "plan": SearchPlan, "reflect": Reflection, "consolidate": SameFactGroups}
NOW = datetime(2024, 5, 8, 10, 0, tzinfo=UTC)


def turn(turn_id: str, speaker: str, text: str, ts: datetime = NOW) -> dict[str, Any]:
    """A turn as the model sees it."""
    return prompts.turn_json(Turn(conversation_id="c1", turn_id=turn_id, speaker=speaker, role="user", text=text,
                                  ts=ts))


def request(purpose: Purpose, response_format: str | None = "json_schema", **data: Any) -> dict[str, Any]:
    """A chat-completions body as engram sends it for `purpose` (`response_format` None: the schema in the prompt)."""
    schema = SCHEMAS[purpose].model_json_schema()
    hint = None if response_format == "json_schema" else json.dumps(schema)
    body: dict[str, Any] = {"model": "m", "temperature": 0,
                            "messages": prompts.messages(purpose, prompts.document(purpose, **data), hint)}
    if response_format == "json_schema":
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": purpose, "schema": schema}}
    elif response_format == "json_object":
        body["response_format"] = {"type": "json_object"}
    return body


def ask(purpose: Purpose, **data: Any) -> Any:
    """The fake model's validated answer to one task."""
    return SCHEMAS[purpose].model_validate_json(chat_model.answer(request(purpose, **data)))


def window_data(turns: list[dict[str, Any]], context: list[dict[str, Any]] | None = None,
                language: str = "en") -> dict[str, Any]:
    """The data of a compress request."""
    return {"language": language, "conversation_id": "c1", "turns": turns, "context": context or []}


ENGLISH = [turn("t1", "Ana", "Hi Ben! Yesterday I moved to Porto with my dog."),
           turn("t2", "Ben", "Great, are you happy there? I'm allergic to dogs, by the way.")]
CONTEXT = [turn("t0", "Ben", "How is your move going?")]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    """A fake OpenAI server on a loopback port."""
    with serve() as state:
        yield state


def client(fake: FakeOpenAI, **options: Any) -> openai.OpenAI:
    """The real openai client, pointed at the fake."""
    return openai.OpenAI(base_url=fake.url, api_key="x", **{"max_retries": 0, **options})


def create(fake: FakeOpenAI, body: dict[str, Any], **options: Any) -> Any:
    """One chat completion through the real client."""
    with client(fake, **options) as api:
        return api.chat.completions.create(**body)


# ---- the model ----------------------------------------------------------------------------------------------------

def test_english_compress_names_speakers_dates_and_cites_only_the_window() -> None:
    """English compression replaces pronouns and relative dates with names and absolute dates, reads 'you' as the other
    speaker, drops greetings, ranks an allergy above a move, and cites only the window's turns, never its context."""
    window = ask("compress", **window_data(ENGLISH, CONTEXT))
    texts = [s.text for s in window.statements]
    moved = next(s for s in window.statements if "Porto" in s.text)
    assert "Ana" in moved.text and "Ana's dog" in moved.text and "2024-05-07" in moved.text
    assert not re.search(r"\b(I|my|yesterday)\b", moved.text, re.IGNORECASE)
    assert moved.source_turn_ids == ["t1"] and "Ana" in moved.persons and moved.location == "Porto"
    assert moved.occurred_at == NOW
    allergy = next(s for s in window.statements if "allergic" in s.text)
    assert allergy.text.startswith("Ben is allergic") and allergy.importance > moved.importance
    assert any("Ana happy" in t for t in texts)  # "you" is the one other speaker
    assert not any(t.startswith("Hi") or "Hi Ben" in t for t in texts)  # greetings are dropped
    cited = {i for s in window.statements for i in s.source_turn_ids}
    assert cited <= {"t1", "t2"} and "t0" not in cited


def test_compress_keeps_at_most_twelve_statements() -> None:
    """A window with more to say than twelve statements is compressed to exactly twelve, the last still covering the
    last turn."""
    turns = [turn(f"t{i}", "Ana", f"I visited museum number {i}. It was nice.") for i in range(10)]
    window = ask("compress", **window_data(turns))
    assert len(window.statements) == 12
    assert "t9" in window.statements[-1].source_turn_ids and "museum number 9" in window.statements[-1].text


def test_chinese_compress_answers_in_chinese_with_names_and_dates() -> None:
    """Chinese compression answers only in Chinese, replaces 我 and relative dates with the speaker's name and an
    absolute Chinese date, and cites the window's turns."""
    turns = [turn("z1", "小明", "昨天我搬到上海了。我的猫很喜欢新家。"), turn("z2", "丽丽", "你喜欢上海吗？")]
    window = ask("compress", **window_data(turns, language="zh"))
    assert window.statements
    for statement in window.statements:
        assert chat_model.HAN.search(statement.text) and "I " not in statement.text
        assert not re.search(r"[A-Za-z]", statement.text)  # no English added (the speakers have Chinese names)
        assert statement.source_turn_ids[0] in {"z1", "z2"}
    assert "小明" in window.statements[0].text and "2024年5月7日" in window.statements[0].text
    assert "我" not in window.statements[0].text and "小明的猫" in window.statements[1].text
    assert "丽丽" in window.statements[2].text and "小明喜欢上海" in window.statements[2].text


def test_facts_from_first_person_statements_only() -> None:
    """The fake model extracts facts only from first-person statements, skipping questions, negations and past states,
    and cites the turn that stated each."""
    turns = [turn("t1", "Ana", "I moved to Porto last year. I'm allergic to peanuts."),
             turn("t2", "Ana", "Do I live in Porto? I don't work at Acme. I used to live in Rome.")]
    found = ask("facts", language="en", turns=turns).facts
    by_attribute = {f.attribute: f for f in found}
    assert set(by_attribute) == {"lives_in", "allergy:peanuts"}
    lives = by_attribute["lives_in"]
    assert (lives.subject, lives.value, lives.text) == ("Ana", "Porto", "Ana lives in Porto")
    assert lives.source_turn_id == "t1"
    assert by_attribute["allergy:peanuts"].value == "allergic"


def test_a_question_states_no_fact() -> None:
    """An English or a Chinese question yields no facts."""
    assert ask("facts", language="en", turns=[turn("t1", "Ana", "Do I live in Porto?")]).facts == []
    assert ask("facts", language="zh", turns=[turn("z1", "小明", "我住在上海吗？")]).facts == []


def test_chinese_facts() -> None:
    """Chinese statements yield their residence and allergy facts written in Chinese, and a dislike yields none."""
    found = ask("facts", language="zh", turns=[turn("z1", "小明", "我住在上海。我对花生过敏。我不喜欢咖啡。")]).facts
    assert [(f.attribute, f.value, f.text) for f in found] == [("lives_in", "上海", "小明住在上海"),
                                                                ("allergy:花生", "allergic", "小明对花生过敏")]


def test_summary_folds_turns_into_the_previous_summary_within_max_words() -> None:
    """A summary starts from the previous one, adds each new turn with its speaker and absolute dates, and is cut to
    max_words words."""
    turns = [turn("t1", "Ana", "Tomorrow I start at Acme. It is exciting."), turn("t2", "Ben", "Good luck!")]
    text = ask("summary", language="en", previous_summary="Ana looked for a job.", turns=turns, max_words=50).summary
    assert text.startswith("Ana looked for a job.") and "Ana will" not in text
    assert "Ana: On 2024-05-09 Ana starts at Acme." in text and "Ben: Good luck!" in text
    short = ask("summary", language="en", previous_summary="", turns=turns, max_words=4).summary
    assert len(short.split()) == 4 and short.startswith("Ana:")


def test_plan_splits_a_two_part_question_and_dates_the_dated_part() -> None:
    """A two-part question is planned as two sub-queries about the person it names, and only the part that names a year
    is limited to that year."""
    plan = ask("plan", query="What did Ana eat and where did she travel in 2023?", now=NOW, persons=["Ana", "Ben"])
    assert len(plan.queries) == 2
    eat, travel = plan.queries
    assert eat.keywords == ["eat"] and eat.persons == ["Ana"] and eat.since is None
    assert "Ana" in travel.query and travel.keywords == ["travel"] and travel.persons == ["Ana"]
    assert travel.since == datetime(2023, 1, 1, tzinfo=UTC)
    assert travel.until is not None and (travel.until.year, travel.until.month, travel.until.day) == (2023, 12, 31)


def test_plan_of_a_simple_question_adds_one_about_the_person() -> None:
    """A simple question is planned as itself plus a shorter query about the person it names, both filtered to that
    person."""
    plan = ask("plan", query="Where does Ana live?", now=NOW)
    assert [q.query for q in plan.queries] == ["Where does Ana live?", "Ana live"]
    assert all(q.persons == ["Ana"] for q in plan.queries)


def test_reflect_is_sufficient_only_when_every_keyword_is_found() -> None:
    """Reflection is sufficient when the memories cover every keyword of the question, otherwise asks for the missing
    part, and stops once that has been searched."""
    memories = [{"id": "m1", "text": "Ana lives in Porto.", "occurred_at": None}]
    enough = ask("reflect", query="Where does Ana live?", now=NOW, round=1, searched=[], memories=memories)
    assert enough.sufficient and enough.missing == []
    query = "Where does Ana live and which pets does she have?"
    more = ask("reflect", query=query, now=NOW, round=1, searched=[query], memories=memories)
    assert not more.sufficient and [m.query for m in more.missing] == ["pets Ana"]
    assert more.missing[0].keywords == ["pets"] and more.missing[0].persons == ["Ana"]
    done = ask("reflect", query=query, now=NOW, round=2, searched=[query, "pets Ana"], memories=memories)
    assert done.sufficient and done.missing == []  # nothing new left to ask


def test_consolidate_groups_the_same_fact_of_the_same_person() -> None:
    """Consolidation groups statements about the same attribute of the same person, in either language or through a
    stated slot, and leaves other people and attributes apart."""
    statements = [{"id": "s1", "text": "Ana lives in Porto.", "occurred_at": None},
                  {"id": "s2", "text": "Ben lives in Rome.", "occurred_at": None},
                  {"id": "s3", "text": "Ana works at Acme.", "occurred_at": None},
                  {"id": "s4", "text": "On 2024-05-07 Ana moved to Lisbon.", "occurred_at": None},
                  {"id": "s5", "text": "小明住在上海", "occurred_at": None},
                  {"id": "s6", "text": "2024年5月7日，小明搬到北京", "occurred_at": None},
                  {"id": "s7", "text": "Ben started a new job.", "occurred_at": None, "subject": "Ben",
                   "attribute": "works_at", "value": "Initech"},
                  {"id": "s8", "text": "Ben works for Initech.", "occurred_at": None}]
    assert ask("consolidate", statements=statements).groups == [["s1", "s4"], ["s5", "s6"], ["s7", "s8"]]


def test_an_unconstrained_request_gets_a_chatty_fenced_answer() -> None:
    """Without a JSON schema the answer wraps the JSON in chatter and a fenced block, while json_object mode returns
    bare JSON."""
    content = chat_model.answer(request("compress", None, **window_data(ENGLISH)))
    assert content.startswith("Here is the JSON:")
    fenced = re.search(r"```json\n(\{.*\})\n```", content, re.DOTALL)
    assert fenced and CompressedWindow.model_validate_json(fenced.group(1)).statements
    assert json.loads(chat_model.answer(request("plan", "json_object", query="Where is Ana?", now=NOW)))


def test_a_repair_round_answers_the_original_document_again() -> None:
    """A repair round after an invalid reply is answered exactly as the original request was."""
    body = request("compress", **window_data(ENGLISH))
    body["messages"] += [{"role": "assistant", "content": '{"statements": [{"text": "Ana'},
                         {"role": "user", "content": "That reply was invalid: the reply is not valid JSON. Answer the "
                                                     "same task again with only the corrected JSON object."}]
    assert chat_model.answer(body) == chat_model.answer(request("compress", **window_data(ENGLISH)))


def test_answers_are_derived_from_the_turns() -> None:
    """The fake model's answer follows the turns' content, not a canned reply."""
    one = ask("compress", **window_data([turn("t1", "Kim", "I moved to Oslo.")]))
    other = ask("compress", **window_data([turn("t1", "Lea", "I moved to Cairo.")]))
    assert one.statements[0].text == "Kim moved to Oslo." and other.statements[0].text == "Lea moved to Cairo."


# ---- misbehaviour -------------------------------------------------------------------------------------------------

DATA: dict[Purpose, dict[str, Any]] = {
    "compress": window_data(ENGLISH),
    "facts": {"language": "en", "turns": ENGLISH},
    "summary": {"language": "en", "previous_summary": "", "turns": ENGLISH, "max_words": 50},
    "plan": {"query": "Where does Ana live?", "now": NOW},
    "reflect": {"query": "Where does Ana live?", "now": NOW, "round": 1, "searched": [], "memories": []},
    "consolidate": {"statements": [{"id": "s1", "text": "Ana lives in Porto."}]},
}


@pytest.mark.parametrize("purpose", PURPOSES)
@pytest.mark.parametrize("how", ["malformed", "wrong_schema", "junk"])
def test_every_misbehaviour_fails_validation(purpose: Purpose, how: chat_model.Misbehaviour) -> None:
    """For every purpose the normal answer validates against its schema, and every misbehaviour (malformed, wrong
    schema, junk) fails validation."""
    body = request(purpose, **DATA[purpose])
    SCHEMAS[purpose].model_validate_json(chat_model.answer(body))
    with pytest.raises(ValidationError):
        SCHEMAS[purpose].model_validate_json(chat_model.misbehave(body, how))


def test_misbehaving_server_answers(fake: FakeOpenAI) -> None:
    """Through the real client, the fake server answers malformed JSON, a wrong schema, foreign turn ids or junk on
    demand, counting each call."""
    body = request("compress", **window_data(ENGLISH, CONTEXT))
    fake.misbehave = "malformed"
    content = create(fake, body).choices[0].message.content
    assert content.startswith('{"statements": [{"text": "') and "Ana" in content
    with pytest.raises(json.JSONDecodeError):
        json.loads(content)
    fake.misbehave = "wrong_schema"
    wrong = json.loads(create(fake, body).choices[0].message.content)
    assert wrong["statements"] and all("source_turn_ids" not in s for s in wrong["statements"])
    fake.misbehave = "foreign_ids"
    foreign = CompressedWindow.model_validate_json(create(fake, body).choices[0].message.content)
    assert foreign.statements and not {i for s in foreign.statements for i in s.source_turn_ids} & {"t0", "t1", "t2"}
    fake.misbehave = "junk"
    junk = create(fake, body).choices[0].message.content
    assert "Ana" in junk and "{" not in junk
    assert fake.chat_calls == 4


def test_foreign_fact_ids(fake: FakeOpenAI) -> None:
    """With foreign_ids set, extracted facts cite only a turn id that was not in the request."""
    fake.misbehave = "foreign_ids"
    content = create(fake, request("facts", **DATA["facts"])).choices[0].message.content
    found = ExtractedFacts.model_validate_json(content)
    assert found.facts and {f.source_turn_id for f in found.facts} == {chat_model.FOREIGN_ID}


def test_misbehave_times_then_a_repaired_answer(fake: FakeOpenAI) -> None:
    """misbehave_times=1 spoils only the first reply, so the repair request gets a valid answer and the count drops to
    zero."""
    fake.misbehave, fake.misbehave_times = "malformed", 1
    body = request("compress", **window_data(ENGLISH))
    bad = create(fake, body).choices[0].message.content
    body["messages"] += [{"role": "assistant", "content": bad},
                         {"role": "user", "content": "That reply was invalid: not JSON. Answer again with only the "
                                                     "JSON object."}]
    good = CompressedWindow.model_validate_json(create(fake, body).choices[0].message.content)
    assert good.statements and fake.chat_calls == 2 and fake.misbehave_times == 0


def test_every_request_misbehaves_while_no_count_is_set(fake: FakeOpenAI) -> None:
    """Without misbehave_times, every request misbehaves."""
    fake.misbehave = "junk"
    body = request("plan", **DATA["plan"])
    assert all("{" not in create(fake, body).choices[0].message.content for _ in range(3))


def test_a_delay_trips_the_client_timeout(fake: FakeOpenAI) -> None:
    """A server delay longer than the client's timeout raises APITimeoutError, while a short delay still gets an
    answer."""
    fake.delay_s = 5.0  # the server stops waiting when the block ends
    with pytest.raises(openai.APITimeoutError):
        create(fake, request("plan", **DATA["plan"]), timeout=0.2)
    fake.delay_s = 0.05
    assert create(fake, request("plan", **DATA["plan"]), timeout=5).choices[0].message.content


def test_rate_limit_with_retry_after(fake: FakeOpenAI) -> None:
    """fail_with=429 fails a call as OpenAI's rate limit does, with its error code, message and Retry-After header."""
    fake.fail_with, fake.retry_after = 429, 2
    with pytest.raises(openai.RateLimitError) as caught:
        create(fake, request("plan", **DATA["plan"]))
    assert caught.value.response.headers["retry-after"] == "2"
    assert caught.value.code == "rate_limit_exceeded" and "Rate limit reached" in caught.value.message
    assert fake.chat_calls == 1


def test_fail_times_fails_the_first_requests_only(fake: FakeOpenAI) -> None:
    """fail_times fails only that many requests, chat and embeddings alike, after which the fake answers normally while
    fail_with stays set."""
    fake.fail_with, fake.fail_times, fake.retry_after = 429, 1, 0.01
    reply = create(fake, request("plan", **DATA["plan"]), max_retries=1)
    assert SearchPlan.model_validate_json(reply.choices[0].message.content).queries
    assert fake.chat_calls == 2 and fake.fail_times == 0
    fake.fail_with, fake.fail_times = 503, 2
    with pytest.raises(openai.InternalServerError):
        create(fake, request("plan", **DATA["plan"]))
    with client(fake) as api:
        with pytest.raises(openai.InternalServerError):  # fail_times counts every request, embeddings too
            api.embeddings.create(model="e", input="x")
        assert api.embeddings.create(model="e", input="x").data
    assert fake.fail_with == 503 and fake.fail_times == 0


def test_usage_counts_real_tokens(fake: FakeOpenAI) -> None:
    """Usage reports the real token counts of prompt (plus per-message overhead) and completion, and tokens_served
    totals them per purpose."""
    small = request("compress", **window_data(ENGLISH[:1]))
    large = request("compress", **window_data([*ENGLISH, turn("t3", "Ana", "I love long walks on the beach.")]))
    first, second = create(fake, small), create(fake, large)
    for body, reply in ((small, first), (large, second)):
        usage = reply.usage
        expected = sum(tokens.count(m["content"]) + 4 for m in body["messages"])
        assert usage.prompt_tokens == expected and usage.completion_tokens > 0
        assert usage.completion_tokens == tokens.count(reply.choices[0].message.content)
        assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert second.usage.prompt_tokens > first.usage.prompt_tokens
    assert fake.tokens_served == {"compress": first.usage.total_tokens + second.usage.total_tokens}


def test_max_tokens_cuts_the_answer(fake: FakeOpenAI) -> None:
    """max_tokens cuts the completion to that many tokens and reports finish_reason 'length'."""
    reply = create(fake, {**request("compress", **window_data(ENGLISH)), "max_tokens": 5})
    assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == 5


def test_chat_reply_override_and_reset(fake: FakeOpenAI) -> None:
    """reset() clears misbehaviour, failures, delay, a chat_reply override and the counters, and a chat_reply set
    afterwards becomes the answer."""
    fake.chat_reply = lambda body: '{"summary": "fixed"}'
    fake.misbehave, fake.fail_with, fake.delay_s = "junk", 500, 1.0
    fake.reset()
    assert create(fake, request("summary", **DATA["summary"])).choices[0].message.content != '{"summary": "fixed"}'
    fake.chat_reply = lambda body: '{"summary": "fixed"}'
    assert create(fake, request("summary", **DATA["summary"])).choices[0].message.content == '{"summary": "fixed"}'
    fake.reset()
    assert (fake.chat_calls, fake.requests, fake.tokens_served) == (0, [], {})
    body = request("summary", **DATA["summary"])
    assert fake.chat_reply(body) == chat_model.answer(body) != '{"summary": "fixed"}'  # the default model again
    assert (fake.fail_with, fake.misbehave, fake.delay_s) == (None, None, 0.0)
