"""Windows' text work in worker processes with a CPU budget: the same drafts as on a thread within it; past it the
worker is stopped, the window comes back as plain dated lines (no facts), and the next window is worked on as usual."""
import pytest
from prometheus_client import REGISTRY

from shared.compress import OfflineCompressor
from shared.compress import workers as text_workers
from shared.compress.facts import RuleFactExtractor
from shared.compress.model import Window
from shared.compress.plain import plain_episode
from shared.compress.workers import TextWorkers
from tests.support.turns import conversation

WINDOW = Window(tenant_id="t", conversation_id="c1", turns=conversation(
    [("Ana", "I moved to Lisbon last week and my dog Rex loves the beach."), ("Bo", "Lisbon suits you, Ana.")]))


def _exceeded(work: str) -> float:
    return REGISTRY.get_sample_value("engram_text_budget_exceeded_total", {"work": work}) or 0.0


async def test_within_the_budget_the_workers_give_what_the_thread_gives() -> None:
    """The compressor's entry and the rules' facts, computed in a worker process, equal the in-process ones."""
    workers = TextWorkers(1, budget_s=30.0)
    try:
        assert await workers.compress(WINDOW) == OfflineCompressor().compress_sync(WINDOW)
        facts = await workers.facts(WINDOW)
        assert facts == RuleFactExtractor().extract_sync(WINDOW) and facts
    finally:
        workers.close()


async def test_past_the_budget_the_window_is_plain_and_the_next_one_is_worked_on() -> None:
    """A budget no work can meet: the worker is stopped, the window comes back as plain lines and no facts, each
    counted; with the budget back, the next call is answered by a fresh worker."""
    workers = TextWorkers(1, budget_s=0.001)
    before = _exceeded("compress"), _exceeded("facts")
    try:
        assert await workers.compress(WINDOW) == [plain_episode(WINDOW)]
        assert await workers.facts(WINDOW) == []
        assert (_exceeded("compress"), _exceeded("facts")) == (before[0] + 1, before[1] + 1)
        workers.budget_s = 30.0
        assert await workers.compress(WINDOW) == OfflineCompressor().compress_sync(WINDOW)
    finally:
        workers.close()


async def test_the_kernel_ends_a_worker_past_its_cpu_budget_whatever_the_clock_allows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the wall-clock limit out of reach, a window whose dating takes far more CPU than its budget (16,000
    characters of dates for dateparser, about a second) is cut short by the budget's own timer: plain lines, counted;
    the window after it, within the budget, is worked on by a fresh worker."""
    monkeypatch.setattr(text_workers, "WALL_FACTOR", 10_000.0)
    dates = "On 3 May 2021 and 4 June 2022, then 5 July 2023. " * 320
    slow = Window(tenant_id="t", conversation_id="c2", turns=conversation([("Ana", dates[:16_000])]))
    workers = TextWorkers(1, budget_s=0.05)
    before = _exceeded("compress")
    try:
        assert await workers.compress(slow) == [plain_episode(slow)]
        assert _exceeded("compress") == before + 1
        workers.budget_s = 30.0
        assert await workers.compress(WINDOW) == OfflineCompressor().compress_sync(WINDOW)
    finally:
        workers.close()


@pytest.mark.parametrize("text", ["plain text", "中文的句子"])
def test_plain_lines_keep_every_turn_whole(text: str) -> None:
    """Plain lines hold each turn's speaker and whole text under its day, and its sources."""
    window = Window(tenant_id="t", conversation_id="c", turns=conversation([("Ana", text), ("Bo", text * 3)]))
    draft = plain_episode(window)
    assert draft.text.splitlines() == ["[Mon 8 May 2023]", f"Ana: {text}", f"Bo: {text * 3}"]
    assert draft.source_turn_ids == [t.turn_id for t in window.turns] and draft.kind == "episodic"
