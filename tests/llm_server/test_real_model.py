"""engram's LLM path against a real model server, not the suite's fake: llama-cpp-python's server with
SmolLM2-135M-Instruct, through NATS, Qdrant Edge and the client SDK. Every purpose reaches the model and is answered
(ok, repaired, or invalid and counted as a fallback), none ends in an error, and the server outlives the run.

The model's output quality is not measured: a 135M model gets many answers wrong, and that is the offline fallback's
business (the metrics count it), not this check's."""
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from prometheus_client import REGISTRY

from engram_client import MemoryClient, wait_until_stored
from engram_client.contract import Turn
from services.stack import Running, running
from shared.llm.schemas import PURPOSES, ResponseFormat
from shared.messaging import nats_server
from tests.support.ids import unique
from tests.support.llama import ANY_SCHEMA, MODEL_ALIAS, LlamaServer, Servers, refusal
from tests.support.polling import eventually
from tests.support.stacks import fast_settings
from tests.support.turns import conversation

ENGLISH = [("Ana", "I moved to Porto last month and I love the river walks."),
           ("Bea", "Nice! Did you find a job there yet?"),
           ("Ana", "Yes, I work at Farfetch now. Yesterday I adopted a dog named Luna."),
           ("Bea", "Congratulations, Ana!")]
CHINESE = [("李雷", "我上个月搬到了杭州，我很喜欢西湖。"), ("韩梅梅", "太好了！你在哪里工作？"),
           ("李雷", "我在阿里巴巴工作。")]
ANSWERED = ("ok", "repaired", "invalid")  # the model answered; invalid ones fell back and were counted
OUTCOMES = ("ok", "repaired", "invalid", "timeout", "rate_limited", "error", "over_budget", "breaker_open")
Counts = dict[str, float]


def snapshot() -> dict[str, Counts]:
    """Per purpose: calls by outcome, seconds (sum and count) and tokens, as engram's metrics have them now."""
    def value(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    return {purpose: {**{o: value("engram_llm_calls_total", purpose=purpose, outcome=o) for o in OUTCOMES},
                      "seconds": value("engram_llm_seconds_sum", purpose=purpose),
                      "timed": value("engram_llm_seconds_count", purpose=purpose),
                      "prompt": value("engram_llm_tokens_total", purpose=purpose, kind="prompt"),
                      "completion": value("engram_llm_tokens_total", purpose=purpose, kind="completion")}
            for purpose in PURPOSES}


def table(before: dict[str, Counts], after: dict[str, Counts]) -> tuple[str, dict[str, Counts]]:
    """The run's per-purpose calls, outcomes, mean seconds per call and tokens, as a Markdown table."""
    rows = ["| purpose | calls | ok | repaired | invalid | error | other | mean s/call | prompt tokens | "
            "completion tokens |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    delta = {p: {k: after[p][k] - before[p][k] for k in after[p]} for p in PURPOSES}
    for purpose, d in delta.items():
        calls = sum(d[o] for o in OUTCOMES)
        other = ", ".join(f"{o} {d[o]:.0f}" for o in OUTCOMES if o not in (*ANSWERED, "error") and d[o]) or "0"
        mean = d["seconds"] / d["timed"] if d["timed"] else 0.0
        rows.append(f"| {purpose} | {calls:.0f} | {d['ok']:.0f} | {d['repaired']:.0f} | {d['invalid']:.0f} | "
                    f"{d['error']:.0f} | {other} | {mean:.1f} | {d['prompt']:.0f} | {d['completion']:.0f} |")
    return "\n".join(rows), delta


@pytest.fixture(scope="module")
def server(servers: Servers) -> LlamaServer:
    """The module's llama.cpp server."""
    return servers.live()


@pytest.fixture
async def stack(server: LlamaServer, tmp_path_factory: pytest.TempPathFactory,
                request: pytest.FixtureRequest) -> AsyncIterator[Running]:
    """Ingestor, retriever and consolidator calling the real server in the test's response format."""
    mode: ResponseFormat = request.node.callspec.params["mode"]
    refused = refusal(server, ANY_SCHEMA[mode])
    if refused is not None:  # llama-cpp-python's server takes only text and json_object
        pytest.skip(f"the server refuses response_format {mode}: {refused}")
    folder = tmp_path_factory.mktemp(f"real-{mode}")
    settings = fast_settings(folder).model_copy(update={
        "llm_base_url": server.url, "llm_model": MODEL_ALIAS, "llm_response_format": mode,
        # A 135M model on two cores answers in seconds; nothing here should time out or retry.
        "llm_timeout_s": 120.0, "llm_max_retries": 0, "llm_max_concurrency": 1, "llm_max_output_tokens": 128,
        "deep_deadline_s": 240.0, "deep_max_rounds": 1,
        # One window of both chats' seven turns, closed on flush only: one compress and one facts call (each costs
        # tens of seconds of a CPU's prompt processing), and the turns outgrow the summary budget.
        "window_turns": len(ENGLISH) + len(CHINESE), "idle_timeout_s": 600.0, "summary_token_budget": 50,
        "summary_max_words": 30})
    nats = nats_server.start(folder / "nats")
    try:
        async with running(settings, nats_url=nats.url) as state:
            yield state
    finally:
        nats.stop()


async def _ingest(client: MemoryClient, turns: list[Turn], conversation_id: str) -> None:
    await client.publish_turns(turns)
    await client.flush(conversation_id)
    await wait_until_stored(client, turns, timeout_s=300)


@pytest.mark.parametrize("mode", ["json_object", "json_schema"])
async def test_every_purpose_reaches_the_real_model_and_none_ends_in_an_error(
        server: LlamaServer, stack: Running, mode: ResponseFormat, capsys: pytest.CaptureFixture[str]) -> None:
    """In each response format the real server accepts, every LLM purpose gets at least one answer from the model,
    every call is answered (ok, repaired or invalid) with none in error, and the server survives."""
    before = snapshot()
    start = datetime(2024, 5, 8, 10, 0, tzinfo=UTC)
    try:
        async with await MemoryClient.connect(stack.nats_url, unique("tenant"), timeout_s=300) as client:
            # English, then Chinese, in one conversation: the model reads both in one window.
            chat = unique("c")
            await _ingest(client, conversation(ENGLISH + CHINESE, conversation_id=chat, start=start), chat)
            # Working memory past its budget: the recall folds older turns, and the model's summary follows.
            folded = await client.recall("Porto", conversation_id=chat, include_working_memory=True)
            assert folded.working_memory_summary, folded
            for deps in stack.retriever_deps:
                await deps.summarizer.settle()
            deep = await client.recall("Where does Ana work and what is her dog called?", k=5, mode="deep",
                                       explain=True)
            assert deep.deep is not None and deep.entries, deep
            await client.consolidate()
            with contextlib.suppress(AssertionError):  # a purpose that never got its call is reported below
                await eventually(lambda: _settled(before), timeout_s=30)
    finally:
        report, delta = table(before, snapshot())
        with capsys.disabled():
            print(f"\nengram against llama-cpp-python's server, SmolLM2-135M-Instruct, "
                  f"ENGRAM_LLM_RESPONSE_FORMAT={mode} (calls: asks, each with at most one repair request):\n"
                  f"{report}\n")
    for purpose in PURPOSES:
        d = delta[purpose]
        assert d["error"] == 0, f"{purpose}: {d['error']:.0f} calls ended in error\n{report}\n{server.log_tail()}"
        assert sum(d[o] for o in ANSWERED) >= 1, f"{purpose} never had an answer from the model\n{report}"
        assert sum(d[o] for o in OUTCOMES) == sum(d[o] for o in ANSWERED), f"{purpose}: calls not answered\n{report}"
    assert server.alive(), server.log_tail()


async def _settled(before: dict[str, Counts]) -> bool:
    """Every purpose has had at least one call end (background summaries included)."""
    now = snapshot()
    return all(sum(now[p][o] - before[p][o] for o in OUTCOMES) >= 1 for p in PURPOSES)
