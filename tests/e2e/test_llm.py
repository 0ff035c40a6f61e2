"""The LLM path end to end: the real openai client against a local server that speaks the OpenAI API and answers
as a model would (tests/fakes/chat_model.py derives every answer from the turns in the request), through NATS and
Qdrant Edge. Valid answers are stored as given; every kind of bad answer or outage ends in the offline path with
nothing lost and the right counters; deep recall stays within its rounds and deadline."""
import asyncio
import itertools
import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY

from engram_client import MemoryClient, wait_until_stored
from engram_client.contract import EntryView, Turn
from services.stack import Running, running
from shared.llm import LlmClient
from shared.llm.schemas import CompressedWindow
from shared.messaging import nats_server
from tests.fakes import chat_model
from tests.fakes.openai_server import FakeOpenAI, serve
from tests.support.ids import unique
from tests.support.memory import stored_turn_ids
from tests.support.polling import eventually
from tests.support.stacks import fast_settings
from tests.support.turns import conversation

BREAKER_FAILURES = 3


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    """The model endpoint every service of the module's stack calls."""
    with serve() as server:
        yield server


@pytest.fixture(scope="module")
async def llm_stack(tmp_path_factory: pytest.TempPathFactory, fake: FakeOpenAI) -> AsyncIterator[Running]:
    """Ingestor, retriever and consolidator with the chat model configured (no retries, short timeouts)."""
    folder = tmp_path_factory.mktemp("llm")
    server = nats_server.start(folder / "nats")
    settings = fast_settings(folder).model_copy(update={
        "llm_base_url": fake.url, "llm_model": "fake-model", "llm_timeout_s": 1.0, "llm_max_retries": 0,
        "llm_breaker_failures": BREAKER_FAILURES, "llm_breaker_cooldown_s": 600.0, "deep_deadline_s": 2.0,
        "deep_max_rounds": 2, "summary_token_budget": 120, "summary_max_words": 60})
    try:
        async with running(settings, nats_url=server.url) as state:
            yield state
    finally:
        server.stop()


def _models(stack: Running) -> list[LlmClient]:
    found = [d.llm for d in stack.ingestor_deps] + [d.retrieval.llm for d in stack.retriever_deps]
    found += [d.consolidation.llm for d in stack.consolidator_deps]
    return [m for m in found if m is not None]


@pytest.fixture
async def client(llm_stack: Running, fake: FakeOpenAI) -> AsyncIterator[MemoryClient]:
    """A fresh tenant, a well-behaved model, closed breakers."""
    fake.reset()
    for model in _models(llm_stack):
        model.breakers.reset()
    async with await MemoryClient.connect(llm_stack.nats_url, unique("tenant")) as memory_client:
        yield memory_client


def count(name: str, **labels: str) -> float:
    """A counter's current value (0 before its first increment)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def chat_bodies(fake: FakeOpenAI, task: str) -> list[dict[str, Any]]:
    """Chat requests of one purpose, in arrival order."""
    out = []
    for request in list(fake.requests):
        if request["path"].endswith("/chat/completions"):
            doc = chat_model.task_document(request["body"])
            if doc is not None and doc.get("task") == task:
                out.append(request["body"])
    return out


async def _entries(client: MemoryClient, conversation_id: str, kind: str) -> list[EntryView]:
    reply = await client.entries(op="list", conversation_id=conversation_id, kind=kind, limit=500)
    return reply.entries


CHAT = [("Ana", "I moved to Porto last month and I love the river walks."),
        ("Bea", "Nice! Did you find a job there yet?"),
        ("Ana", "Yes, I work at Farfetch now. Yesterday I adopted a dog named Luna."),
        ("Bea", "Congratulations, Ana!")]


async def _publish(client: MemoryClient, turns: list[Turn], conversation_id: str) -> None:
    await client.publish_turns(turns)
    await client.flush(conversation_id)
    await wait_until_stored(client, turns, timeout_s=60)


async def test_valid_statements_are_stored_as_given_beside_the_raw_episode(client: MemoryClient, fake: FakeOpenAI,
                                                                           llm_stack: Running) -> None:
    """A valid compression's statements are stored exactly as the model gave them, beside the raw episode of every
    turn, with the facts extracted and the schema sent as json_schema."""
    cid = unique("c")
    turns = conversation(CHAT, conversation_id=cid)
    ok = count("engram_llm_calls_total", purpose="compress", outcome="ok")
    await _publish(client, turns, cid)
    [body] = chat_bodies(fake, "compress")
    given = CompressedWindow.model_validate_json(chat_model.answer(body)).statements
    statements = [e for e in await _entries(client, cid, "fact") if e.attribute is None]
    assert sorted((s.text, s.source_turn_ids) for s in statements) == sorted(
        (g.text, g.source_turn_ids) for g in given)
    assert all(set(s.source_turn_ids) <= {t.turn_id for t in turns} for s in statements)
    assert any("Ana" in s.text and "2023-05-07" in s.text for s in statements), [s.text for s in statements]
    [episode] = await _entries(client, cid, "episodic")
    assert episode.source_turn_ids == [t.turn_id for t in turns]  # the raw window stays the evidence
    assert count("engram_llm_calls_total", purpose="compress", outcome="ok") == ok + 1
    assert sorted(await stored_turn_ids(llm_stack.store, client.tenant)) == sorted(t.turn_id for t in turns)
    facts = {e.attribute: e.value for e in await _entries(client, cid, "fact") if e.attribute}
    assert facts.get("lives_in") == "Porto" and facts.get("works_at") == "Farfetch", facts
    assert body["response_format"]["type"] == "json_schema"  # the default format, with the schema attached
    assert body["response_format"]["json_schema"]["schema"]["title"] == "CompressedWindow"


@pytest.mark.parametrize("misbehaviour", ["malformed", "wrong_schema", "foreign_ids", "junk"])
async def test_answers_that_never_validate_fall_back_after_one_repair_and_lose_nothing(
        client: MemoryClient, fake: FakeOpenAI, llm_stack: Running, misbehaviour: chat_model.Misbehaviour) -> None:
    """Whatever way the model's answers fail to validate (malformed, wrong schema, foreign turn ids, junk), one
    repair is tried, then the offline path stores every turn and the rule-based facts, and no statement."""
    fake.misbehave = misbehaviour
    cid = unique("c")
    turns = conversation(CHAT, conversation_id=cid)
    fell = count("engram_llm_fallbacks_total", purpose="compress", reason="invalid")
    facts_fell = count("engram_llm_fallbacks_total", purpose="facts", reason="invalid")
    await _publish(client, turns, cid)
    assert len(chat_bodies(fake, "compress")) == 2  # the answer, and one repair round
    repair = chat_bodies(fake, "compress")[1]["messages"]
    assert repair[-1]["role"] == "user" and "invalid" in repair[-1]["content"]
    assert count("engram_llm_fallbacks_total", purpose="compress", reason="invalid") == fell + 1
    assert count("engram_llm_fallbacks_total", purpose="facts", reason="invalid") == facts_fell + 1
    assert sorted(await stored_turn_ids(llm_stack.store, client.tenant)) == sorted(t.turn_id for t in turns)
    facts = await _entries(client, cid, "fact")
    assert not [e for e in facts if e.attribute is None]            # no statement from a bad answer
    assert {e.attribute for e in facts} >= {"lives_in", "works_at"}  # the offline rules found the facts


async def test_one_bad_answer_is_repaired_and_the_repaired_answer_stored(client: MemoryClient,
                                                                         fake: FakeOpenAI) -> None:
    """One answer with foreign turn ids is repaired on the second call, counted as repaired, and the repaired
    statements are stored."""
    fake.misbehave, fake.misbehave_times = "foreign_ids", 1
    repaired = count("engram_llm_calls_total", purpose="compress", outcome="repaired")
    cid = unique("c")
    await _publish(client, conversation(CHAT, conversation_id=cid), cid)
    assert count("engram_llm_calls_total", purpose="compress", outcome="repaired") == repaired + 1
    assert [e for e in await _entries(client, cid, "fact") if e.attribute is None]


async def test_a_timeout_falls_back_and_loses_nothing(client: MemoryClient, fake: FakeOpenAI,
                                                      llm_stack: Running) -> None:
    """A model slower than llm_timeout_s sends the window down the offline path, counted as a timeout, and every turn
    is stored."""
    fake.delay_s = 1.5  # past llm_timeout_s
    before = count("engram_llm_fallbacks_total", purpose="compress", reason="timeout")
    cid = unique("c")
    turns = conversation(CHAT, conversation_id=cid)
    await _publish(client, turns, cid)
    assert count("engram_llm_fallbacks_total", purpose="compress", reason="timeout") == before + 1
    assert sorted(await stored_turn_ids(llm_stack.store, client.tenant)) == sorted(t.turn_id for t in turns)


@pytest.mark.parametrize(("status", "reason"), [(429, "rate_limited"), (503, "error")])
async def test_a_429_storm_or_an_outage_opens_the_breaker_and_every_turn_is_stored(
        client: MemoryClient, fake: FakeOpenAI, llm_stack: Running, status: int, reason: str) -> None:
    """Repeated 429s or 503s open the breaker after three calls, later windows never reach the endpoint, and every
    turn is still stored as episodes."""
    fake.fail_with, fake.retry_after = status, 0.1
    failed = count("engram_llm_fallbacks_total", purpose="compress", reason=reason)
    refused = count("engram_llm_fallbacks_total", purpose="compress", reason="breaker_open")
    cid = unique("c")
    turns = conversation([(s, f"{t} (part {i})") for i in range(4) for s, t in CHAT], conversation_id=cid)
    await _publish(client, turns, cid)  # 16 turns: 4 windows, each a compress and a facts call
    # Three failed calls open the ingestor's breaker; the rest of the windows never reach the endpoint.
    assert fake.chat_calls == BREAKER_FAILURES
    assert count("engram_llm_fallbacks_total", purpose="compress", reason=reason) > failed
    assert count("engram_llm_fallbacks_total", purpose="compress", reason="breaker_open") > refused
    assert REGISTRY.get_sample_value("engram_llm_breaker_open") == 1
    assert sorted(await stored_turn_ids(llm_stack.store, client.tenant)) == sorted(t.turn_id for t in turns)
    assert len(await _entries(client, cid, "episodic")) == 4


async def test_chinese_turns_give_chinese_statements(client: MemoryClient) -> None:
    """Statements compressed from Chinese turns are written mostly in Chinese characters and keep the names and
    places."""
    cid = unique("c")
    turns = conversation([("李雷", "我上个月搬到了杭州，我很喜欢西湖。"), ("韩梅梅", "太好了！你在哪里工作？"),
                          ("李雷", "我在阿里巴巴工作。昨天我买了一只猫。")], conversation_id=cid)
    await _publish(client, turns, cid)
    statements = [e for e in await _entries(client, cid, "fact") if e.attribute is None]
    assert statements
    for statement in statements:
        han = sum(1 for c in statement.text if "\u4e00" <= c <= "\u9fff")
        assert han / max(1, sum(1 for c in statement.text if c.isalpha())) > 0.5, statement.text
    assert any("李雷" in s.text and "杭州" in s.text for s in statements)


async def test_fast_recall_never_calls_the_model(client: MemoryClient, fake: FakeOpenAI) -> None:
    """A fast recall answers without any call to the model."""
    cid = unique("c")
    await _publish(client, conversation(CHAT, conversation_id=cid), cid)
    calls = fake.chat_calls
    reply = await client.recall("Where does Ana work?", k=5)
    assert reply.entries and fake.chat_calls == calls


async def test_deep_recall_plans_searches_reflects_and_says_so(client: MemoryClient, fake: FakeOpenAI) -> None:
    """A deep recall plans two searches that both find hits, stops as sufficient or at max rounds, returns both
    answers' entries, and makes one plan call and at most two reflect calls."""
    cid = unique("c")
    await _publish(client, conversation(CHAT, conversation_id=cid), cid)
    reply = await client.recall("Where does Ana work and what is the name of her dog?", k=5, mode="deep",
                                explain=True)
    trace = reply.deep
    assert trace is not None and 1 <= trace.rounds <= 3, trace
    plan = [s for s in trace.searches if s.round == 1]
    assert len(plan) == 2 and all(s.hits for s in plan), plan
    assert trace.stopped in ("sufficient", "max_rounds")
    texts = " ".join(e.text for e in reply.entries)
    assert "Farfetch" in texts and "Luna" in texts
    assert len(chat_bodies(fake, "plan")) == 1
    assert len(chat_bodies(fake, "reflect")) <= 2  # deep_max_rounds


async def test_deep_recall_answers_by_its_deadline_with_what_it_has(client: MemoryClient, fake: FakeOpenAI) -> None:
    """A deep recall whose model calls would outlast deep_deadline_s stops at the deadline, says so, counts it, and
    still returns the fast search's entries in time."""
    cid = unique("c")
    await _publish(client, conversation(CHAT, conversation_id=cid), cid)
    fake.delay_s = 0.95  # each call just inside the timeout; the plan and two reflections need about 3 s
    deadlines = count("engram_recall_deep_deadline_total")
    # The guard only turns a hang into a failure; the reply itself says the deadline ended the search.
    reply = await asyncio.wait_for(client.recall("What did Ana adopt and what is her favourite colour?", k=5,
                                                 mode="deep", explain=True), 30)
    assert reply.deep is not None and reply.deep.stopped == "deadline", reply.deep
    assert reply.entries  # the fast search's hits at least
    assert count("engram_recall_deep_deadline_total") == deadlines + 1


async def test_a_deep_recall_that_finds_every_deep_slot_taken_is_answered_as_fast_busy(
        client: MemoryClient, fake: FakeOpenAI, llm_stack: Running) -> None:
    """Deep recalls may hold half of a retriever's workers; one that finds them all taken is answered at once as a
    fast recall (`deep.stopped == "busy"`, no model call), and the next one, once a slot is free, plans again."""
    cid = unique("c")
    await _publish(client, conversation(CHAT, conversation_id=cid), cid)
    deps = llm_stack.retriever_deps[0]
    slots = deps.retrieval.deep_slots
    held = 0
    while not slots.locked():  # what deep recalls in flight would hold
        await slots.acquire()
        held += 1
    assert held == deps.settings.recall_workers // 2
    try:
        calls = fake.chat_calls
        busy = await client.recall("Where does Ana work?", k=5, mode="deep", explain=True)
        assert busy.deep is not None and (busy.deep.stopped, busy.deep.rounds) == ("busy", 0), busy.deep
        assert busy.entries and fake.chat_calls == calls
    finally:
        for _ in range(held):
            slots.release()
    planned = await client.recall("Where does Ana work?", k=5, mode="deep", explain=True)
    assert planned.deep is not None and planned.deep.stopped != "busy" and planned.deep.rounds >= 1


async def test_deep_recall_with_the_model_down_answers_like_fast(client: MemoryClient, fake: FakeOpenAI,
                                                                 llm_stack: Running) -> None:
    """With the model failing, a deep recall reports model_failed after zero rounds and returns the fast recall's
    entries, group by group of equal scores."""
    cid = unique("c")
    await _publish(client, conversation(CHAT, conversation_id=cid), cid)
    wm = llm_stack.ingestor_deps[0].working_memory
    # Stored is not finished: the closer supersedes the new facts' older statements after the save, and only then
    # lets the window go; comparing two recalls needs that done.
    await eventually(lambda: wm.get(client.tenant, cid), lambda buffer: buffer is None or not buffer.sealed)
    fast = await client.recall("Where does Ana work?", k=5)
    fake.fail_with = 500
    deep = await client.recall("Where does Ana work?", k=5, mode="deep", explain=True)
    assert deep.deep is not None and deep.deep.stopped == "model_failed" and deep.deep.rounds == 0
    # The same ranking (deep re-scores it by rank). Entries the fast search scores alike may come in either order,
    # and the last places may go to any entries tied with them (the engine orders ties as its segments are laid out,
    # which can change between two requests): compare group by group of equal fast scores.
    groups = [list(g) for _, g in itertools.groupby(range(len(fast.entries)),
                                                    key=lambda i: round(fast.entries[i].score, 6))]
    assert len(deep.entries) == len(fast.entries)
    for group in groups[:-1]:
        assert {deep.entries[i].id for i in group} == {fast.entries[i].id for i in group}


async def test_long_working_memory_comes_back_as_a_summary_and_the_recent_turns(
        client: MemoryClient, llm_stack: Running) -> None:
    """Long working memory comes back as an extractive summary of the older turns plus the recent ones, later
    replaced by the model's cached summary, which a forget removes."""
    cid = unique("c")
    lines = [("Ana" if i % 2 == 0 else "Bea", f"Point {i}: the plan for the Lisbon trip needs item number {i}.")
             for i in range(12)]
    turns = conversation(lines, conversation_id=cid)
    await client.publish_turns(turns)
    await eventually(lambda: client.recall("trip", conversation_id=cid, include_working_memory=True),
                     lambda r: len(r.working_memory) + (r.working_memory_summary is not None) >= 2
                     and (r.working_memory_summary is not None), timeout_s=30)
    first = await client.recall("trip", conversation_id=cid, include_working_memory=True)
    # Extractive at first: the summary quotes the turns before the recent ones (which of the oldest are still in
    # working memory, rather than stored as a window by now, depends on how fast the machine is).
    summarised = [int(n) for n in re.findall(r"Point (\d+)", first.working_memory_summary or "")]
    recent = [int(n) for t in first.working_memory for n in re.findall(r"Point (\d+)", t.text)]
    assert summarised and recent and max(summarised) < min(recent), (summarised, recent)
    assert first.working_memory[-1].turn_id == turns[-1].turn_id
    assert "Summary of earlier turns:" in first.context
    for deps in llm_stack.retriever_deps:
        await deps.summarizer.settle()
    wm = llm_stack.retriever_deps[0].working_memory
    cached = await wm.summary(client.tenant, cid)
    assert cached is not None and cached.source == "model"
    second = await client.recall("trip", conversation_id=cid, include_working_memory=True)
    assert second.working_memory_summary == cached.text and "Ana" in cached.text
    forgotten = await client.forget(conversation_id=cid)
    assert forgotten.verified and await wm.summary(client.tenant, cid) is None


async def test_the_consolidator_asks_which_statements_state_the_same_fact_and_code_picks_the_newest(
        client: MemoryClient, fake: FakeOpenAI, llm_stack: Running) -> None:
    """The consolidator asks the model which statements fill the same slot and supersedes the older one, so recall
    shows the newer fact, and a second run asks nothing new and changes nothing."""
    old, new = unique("c"), unique("c")
    start = datetime(2023, 1, 10, 9, 0, tzinfo=UTC)
    await _publish(client, conversation([("Ana", "I live in Lisbon."), ("Bea", "Lovely city!")],
                                        conversation_id=old, start=start), old)
    await _publish(client, conversation([("Ana", "I live in Porto."), ("Bea", "Oh, you moved!")],
                                        conversation_id=new, start=start + timedelta(days=150)), new)
    summary = await client.consolidate()
    assert chat_bodies(fake, "consolidate")
    before_calls = len(chat_bodies(fake, "consolidate"))
    lisbon = [e for e in await _entries(client, old, "fact") if e.attribute is None and "Lisbon" in e.text]
    assert lisbon and all(e.superseded_by and e.slot_by_model for e in lisbon), lisbon
    reply = await client.recall("Where does Ana live?", k=10)
    assert not any("Lisbon" in e.text for e in reply.entries if e.kind == "fact")
    assert any("Porto" in e.text for e in reply.entries)
    history = await client.entries(op="history", ids=[lisbon[0].id])
    assert [e.id for e in history.entries][:1] == [lisbon[0].id] and len(history.entries) >= 2
    again = await client.consolidate()  # every statement was asked about: no new question, no change
    assert len(chat_bodies(fake, "consolidate")) == before_calls
    assert again.superseded == 0 and summary.owners == again.owners


async def test_every_token_the_endpoint_counts_reaches_the_metrics_by_purpose(client: MemoryClient,
                                                                              fake: FakeOpenAI) -> None:
    """The prompt and completion tokens the endpoint reports for compress and facts calls are added exactly to the
    token metrics of each purpose."""
    def tokens(purpose: str) -> float:
        return sum(count("engram_llm_tokens_total", purpose=purpose, kind=k) for k in ("prompt", "completion"))

    before = {p: tokens(p) for p in ("compress", "facts")}
    cid = unique("c")
    await _publish(client, conversation(CHAT, conversation_id=cid), cid)
    for purpose in ("compress", "facts"):
        assert tokens(purpose) - before[purpose] == fake.tokens_served[purpose] > 0


async def test_one_tenants_slow_windows_open_its_own_breaker_and_not_another_tenants(
        client: MemoryClient, fake: FakeOpenAI, llm_stack: Running) -> None:
    """The model is too slow on one tenant's windows (their content): past three timeouts that tenant's calls pause
    (its windows take the offline path and are all stored), while another tenant's windows are still compressed by
    the model and the endpoint's breaker stays closed."""
    fake.delay_s, fake.slow_when = 1.5, "glacier"  # past llm_timeout_s, on the slow tenant's windows only
    slow_chat = [(s, f"{t} The glacier (part {i}) keeps moving.") for i in range(4) for s, t in CHAT]
    cid = unique("c")
    slow_turns = conversation(slow_chat, conversation_id=cid)
    await _publish(client, slow_turns, cid)
    assert sorted(await stored_turn_ids(llm_stack.store, client.tenant)) == sorted(t.turn_id for t in slow_turns)
    calls_before = fake.chat_calls
    async with await MemoryClient.connect(llm_stack.nats_url, unique("tenant")) as calm:
        calm_cid = unique("c")
        calm_turns = conversation(CHAT, conversation_id=calm_cid)
        await _publish(calm, calm_turns, calm_cid)
        assert fake.chat_calls > calls_before  # the calm tenant's windows still reach the model
        assert sorted(await stored_turn_ids(llm_stack.store, calm.tenant)) == sorted(t.turn_id for t in calm_turns)
    assert REGISTRY.get_sample_value("engram_llm_breaker_open") == 0
    ingest_model = llm_stack.ingestor_deps[0].llm
    assert ingest_model is not None and ingest_model.breakers.of(client.tenant).state == "open"
    assert ingest_model.breakers.of(calm.tenant).state == "closed"
