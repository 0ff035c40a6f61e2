"""The LLM client and compressor over the real openai client and the OpenAI-speaking fake: the three response
formats servers need, the per-tenant budget, and a window compressed twice leaving one set of statements."""
import asyncio
import dataclasses
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from shared.compress import OfflineCompressor
from shared.compress.llm import LlmCompressor
from shared.compress.model import Window
from shared.errors import LlmUnavailable
from shared.ingest.writer import Writer, build, memorize, save
from shared.llm import LlmClient
from shared.llm.schemas import Summary, wire_schema
from shared.settings import Settings
from shared.store import EntryFilter, Scope, all_entries
from tests.fakes import chat_model
from tests.fakes.openai_server import FakeOpenAI, serve
from tests.support.ids import unique
from tests.support.plain import Memory
from tests.support.turns import conversation

CHAT = [("Ana", "I moved to Porto last month and I love the river walks."),
        ("Bea", "Nice! Did you find a job there yet?"),
        ("Ana", "Yes, I work at Farfetch now. Yesterday I adopted a dog named Luna."),
        ("Bea", "Congratulations, Ana!")]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with serve() as server:
        yield server


def llm_settings(fake: FakeOpenAI, **change: Any) -> Settings:
    return Settings(**{"llm_base_url": fake.url, "llm_model": "fake-model", "llm_max_retries": 0,
                       "llm_timeout_s": 2.0, **change})


def window(tenant: str, conversation_id: str = "c1") -> Window:
    return Window(tenant_id=tenant, conversation_id=conversation_id,
                  turns=conversation(CHAT, conversation_id=conversation_id))


def summary_doc() -> str:
    from shared.llm import prompts

    turns = conversation(CHAT)
    return prompts.document("summary", language="en", previous_summary="", max_words=50,
                            turns=[prompts.turn_json(t) for t in turns])


@pytest.mark.parametrize("response_format", ["json_schema", "json_object", "prompt"])
async def test_each_response_format_is_sent_as_its_servers_expect_and_parsed(fake: FakeOpenAI,
                                                                            response_format: str) -> None:
    """Each response format (json_schema, json_object, prompt) sends the request shape its servers expect, spells the
    schema out in the prompt only when the server is not given it, and is parsed into a Summary."""
    llm = LlmClient(llm_settings(fake, llm_response_format=response_format))
    try:
        answer = await llm.ask("t1", "summary", summary_doc(), Summary)
    finally:
        await llm.close()
    assert "Ana" in answer.summary and "Porto" in answer.summary
    body = fake.requests[-1]["body"]
    system = body["messages"][0]["content"]
    if response_format == "json_schema":
        assert body["response_format"]["json_schema"]["schema"]["title"] == "Summary"
        assert "JSON schema" not in system
    elif response_format == "json_object":  # llama.cpp's server constrains to `schema`; the prompt spells it out
        assert body["response_format"] == {"type": "json_object", "schema": wire_schema(Summary)}
        assert "JSON schema" in system and '"maxLength":8000' in system  # the bounds the grammar leaves out
    else:  # no response_format at all: the model answers in prose with a fenced block, which is parsed
        assert "response_format" not in body and "JSON schema" in system


async def test_a_tenant_past_its_hourly_budget_gets_the_offline_path_and_others_do_not(fake: FakeOpenAI) -> None:
    """A tenant that has spent its hourly token budget gets episodes alone (offline compression, counted as
    over_budget) while another tenant still gets statements."""
    settings = llm_settings(fake, llm_tokens_per_hour=1500)
    llm = LlmClient(settings)
    compressor = LlmCompressor(llm, OfflineCompressor())
    refused = REGISTRY.get_sample_value("engram_llm_fallbacks_total",
                                        {"purpose": "compress", "reason": "over_budget"}) or 0
    try:
        spent = []
        for i in range(4):
            drafts = await compressor.compress(window("heavy", f"c{i}"))
            spent.append(len(drafts) > 1)
        assert spent[0] and not spent[-1]  # statements while the budget lasts, then the episode alone
        assert llm.ledger.spent("heavy") >= 1500
        assert len(await compressor.compress(window("calm"))) > 1
    finally:
        await llm.close()
    assert (REGISTRY.get_sample_value("engram_llm_fallbacks_total",
                                      {"purpose": "compress", "reason": "over_budget"}) or 0) > refused
    assert fake.chat_calls == spent.count(True) + 1


async def test_a_window_compressed_again_keeps_one_set_of_statements(fake: FakeOpenAI, memory: Memory) -> None:
    """A window compressed again after a crash, this time falling back, replaces the first compression's statements
    instead of adding to them, and the episode is stored once."""
    llm = LlmClient(llm_settings(fake))
    writer = dataclasses.replace(memory.writer, compressor=LlmCompressor(llm, OfflineCompressor()))
    tenant = unique("t")
    try:
        first = [e for e in await memorize(writer, [window(tenant)]) if e.kind == "fact"]
        assert len(first) >= 3
        fake.misbehave = "junk"  # the second compression (a redelivery after a crash) falls back: no statements
        built = await build(writer, [window(tenant)])
        await save(writer, built)
    finally:
        await llm.close()
    stored = await all_entries(memory.store, Scope(tenant_id=tenant), EntryFilter(kinds=["fact"]))
    assert stored == []
    assert len(await all_entries(memory.store, Scope(tenant_id=tenant))) == 1  # the episode, once


async def test_the_offline_compressor_writes_no_statements_and_deletes_none(memory: Memory) -> None:
    """The offline compressor builds a single episode for a window and marks no earlier entry stale."""
    tenant = unique("t")
    writer: Writer = memory.writer
    built = await build(writer, [window(tenant)])
    assert built.stale == {} and [e.entry.kind for e in built.items] == ["episodic"]


async def test_a_429_is_retried_with_backoff_and_then_answered(fake: FakeOpenAI) -> None:
    """Two 429 answers are retried with backoff and the third call is answered, leaving the breaker closed."""
    fake.fail_with, fake.fail_times, fake.retry_after = 429, 2, 0.05
    llm = LlmClient(llm_settings(fake, llm_max_retries=2))
    try:
        answer = await llm.ask("t1", "summary", summary_doc(), Summary)
    finally:
        await llm.close()
    assert "Ana" in answer.summary
    assert fake.chat_calls == 3 and llm.breaker.state == "closed"


async def test_a_deadline_too_close_makes_no_call_and_never_opens_the_breaker(fake: FakeOpenAI) -> None:
    """An ask whose deadline is too close to make a call makes none, one that times out fails as unavailable, and
    neither opens the breaker."""
    llm = LlmClient(llm_settings(fake, llm_breaker_failures=1))
    fake.delay_s = 0.5
    try:
        for timeout_s in (0.01, 0.2):
            with pytest.raises(LlmUnavailable) as failed:
                await llm.ask("t1", "plan", summary_doc(), Summary, timeout_s=timeout_s)
            assert failed.value.reason in ("deadline", "timeout")
    finally:
        await llm.close()
    assert llm.breaker.state == "closed"  # the caller's deadline says nothing about the endpoint
    assert fake.chat_calls == 1


async def test_no_more_than_llm_max_concurrency_calls_run_at_once(fake: FakeOpenAI) -> None:
    """However many asks wait, at most ENGRAM_LLM_MAX_CONCURRENCY requests reach the model at once (the server
    counts them while each is being answered); the others wait for a slot and are all answered."""
    in_flight, most = 0, 0
    lock = threading.Lock()

    def slow_reply(body: dict[str, Any]) -> str:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        try:
            time.sleep(0.2)  # the model at work: long enough for every waiting ask to try for a slot
            return chat_model.answer(body)
        finally:
            with lock:
                in_flight -= 1

    fake.chat_reply = slow_reply
    llm = LlmClient(llm_settings(fake, llm_max_concurrency=2))
    try:
        answers = await asyncio.gather(*(llm.ask(f"t{i}", "summary", summary_doc(), Summary) for i in range(6)))
    finally:
        await llm.close()
    assert len(answers) == 6 and fake.chat_calls == 6
    assert most == 2


async def test_the_assistants_own_words_become_no_statement(fake: FakeOpenAI) -> None:
    """Statements remember what people said: one that restates only the assistant's turns (its advice, its
    questions) is left to the episode, while each person's turn keeps its statement."""
    turns = conversation(CHAT)
    turns = [t.model_copy(update={"role": "assistant", "speaker": "Assistant"}) if t.speaker == "Bea" else t
             for t in turns]
    llm = LlmClient(llm_settings(fake))
    try:
        drafts = await LlmCompressor(llm, OfflineCompressor()).compress(
            Window(tenant_id=unique("t"), conversation_id="c1", turns=turns))
    finally:
        await llm.close()
    said_by = {t.turn_id: t.role for t in turns}
    statements = [d for d in drafts if d.kind == "fact"]
    assert statements, "the fake model restates every sentence: the user's turns must keep theirs"
    assert all(any(said_by[s] == "user" for s in d.source_turn_ids) for d in statements)
    assert not any(d.text.startswith("Assistant said") for d in statements)
