"""The benchmark commands run on tiny inputs and write well-formed results (numbers are not judged here)."""
import asyncio
import json
import os
import sys
from pathlib import Path

SAMPLE = Path(__file__).parents[1] / "fixtures" / "mini_locomo.json"


async def bench(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bench", *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT,
                                                env={**os.environ, "COLUMNS": "200"})
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=300)
    assert proc.returncode == 0, out.decode()
    return out.decode()


async def test_pipeline_bench_measures_ingest_and_recall_against_their_floors(tmp_path: Path) -> None:
    """`bench --only pipeline` exits cleanly and writes ingest throughput, error-free recall load at each
    concurrency and by a token budget alone, recall during ingest and a chart."""
    out = await bench("--only", "pipeline", "--conversation", str(SAMPLE), "--rounds", "3", "--concurrency", "1,2",
                      "--load-turns", "40", "--out", str(tmp_path))
    results = json.loads((tmp_path / "results.json").read_text())
    ingest, recall = results["pipeline"]["ingest"], results["pipeline"]["recall"]
    assert ingest["turns"] == 11 and ingest["end_to_end_turns_per_s"] > 0 and ingest["efficiency"] > 0
    assert [r["concurrency"] for r in recall["load"]] == [1, 2]
    assert all(r["errors"] == 0 and r["answered"] == r["requests"] for r in recall["load"])
    assert recall["floor"]["p50"] > 0 and recall["overhead_p50_c1"] > 0
    by_budget = recall["by_budget"]
    assert by_budget["token_budget"] == 2000 and by_budget["errors"] == 0 and by_budget["p50"] > 0
    assert by_budget["answered"] == by_budget["requests"] > 0
    assert "by 2,000 tokens (no k)" in out
    during = recall["during_ingest"]
    assert during["turns"] == 40 and during["errors"] == 0 and during["n"] >= 1 and during["p99"] >= during["p50"] > 0
    assert results["machine"]["cores"] >= 1
    assert (tmp_path / "recall.png").stat().st_size > 1000
    assert "recall over NATS vs the floor" in out


async def test_scale_bench_grows_a_shard_and_contrasts_local_mode(tmp_path: Path) -> None:
    """`bench --only scale` writes a row per size for Qdrant Edge and one for local mode, with positive timings,
    memory per 100k entries and a chart."""
    await bench("--only", "scale", "--sizes", "300,600", "--scale-queries", "20", "--out", str(tmp_path))
    results = json.loads((tmp_path / "results.json").read_text())
    rows = results["scale"]["rows"]
    assert [(r["backend"], r["entries"]) for r in rows] == [("qdrant-edge", 300), ("qdrant-edge", 600),
                                                           ("qdrant-client local", 300)]
    assert all(r["store_query_ms"]["p50"] > 0 and r["store_ranked_ms"]["p50"] > 0 and r["recall_ms"]["p50"] > 0
               for r in rows)
    assert results["scale"]["rss_mb_per_100k"] > 0
    assert (tmp_path / "scale.png").stat().st_size > 1000


async def test_sweep_bench_times_idle_detection_against_the_old_full_sweep(tmp_path: Path) -> None:
    """`bench --only sweep` reports that a sweep reads no key when nothing is due and only the open conversations
    when they are, against every key for the old sweep."""
    out = await bench("--only", "sweep", "--sweep-keys", "500", "--out", str(tmp_path))
    sweep = json.loads((tmp_path / "results.json").read_text())["sweep"]
    assert sweep["idle_keys"] == 500 and sweep["open_conversations"] == 100
    assert sweep["sweep_nothing_due"]["read"] == 0 and sweep["sweep_all_open_due"]["read"] == 100
    assert sweep["old_sweep_every_key"]["read"] == 600
    assert "idle detection" in out


async def test_store_growth_bench_samples_the_store_s_memory_every_tenth() -> None:
    """`python -m bench.store_growth` writes the entries it is asked for and reports ten samples of anonymous memory
    (none larger after the allocator's trim than before it), the figure per entry of the last one, and the folder's
    growth over the payload rewrites asked for."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bench.store_growth", "--entries", "200",
                                                "--text-words", "20", "--rewrite-s", "2", "--rate", "20",
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=300)
    assert proc.returncode == 0, out.decode()
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert [r["entries"] for r in result["rows"]] == list(range(20, 201, 20))
    assert all(r["after_trim_mb"] <= r["anon_mb"] for r in result["rows"])
    assert result["entries"] == 200 and result["kb_per_entry"] == round(result["rows"][-1]["anon_mb"] * 1024 / 200, 2)
    rewrites = result["rewrites"]
    assert 0 < rewrites["rewrites"] <= 41 and len(rewrites["samples"]) >= 9 and rewrites["before"]["folder_mb"] > 0


async def test_consolidation_bench_times_scheduled_runs_and_splits_their_peak_memory(tmp_path: Path) -> None:
    """`bench --only consolidation` fills a tenant, times its three scheduled runs (each ran the tenant) with their
    peaks, the heap's and the mapped files' apart, and times the scheduler's passes over many tenants."""
    await bench("--only", "consolidation", "--consolidation-sizes", "1000", "--consolidation-tenants", "50",
                "--out", str(tmp_path))
    results = json.loads((tmp_path / "results.json").read_text())["consolidation"]
    [row] = results["rows"]
    assert row["entries"] == row["fill"]["entries"] == 1000 and row["touched"]["new_episodes"] == 200
    for run in (row["first_run"], row["quiet_run"], row["big_user_run"]):
        assert run["ran"] == 1
        assert {"peak_mb", "opened_rss_mb", "opened_anon_mb", "opened_file_mb", "longest_gap_s"} <= set(run)
        assert run["samples"] >= 1 and run["peak_anon_mb"] > 0 and run["peak_file_mb"] > 0  # the sampler ran
    scheduler = results["scheduler"]
    assert scheduler["tenants"] == 50 and scheduler["nothing_due_ran"] == 0 and scheduler["some_due_ran"] == 1


async def test_console_bench_times_every_page_over_http(tmp_path: Path) -> None:
    """`bench --only console` imports the entries asked for into one user, then writes p50, p95 and max of every
    console page and of the export download over its rounds, with the NATS requests each made and whether each page's
    p95 is within the budget."""
    out = await bench("--only", "console", "--console-entries", "50", "--console-rounds", "2", "--out", str(tmp_path))
    console = json.loads((tmp_path / "results.json").read_text())["console"]
    assert console["entries"] == 50 and console["rounds"] == 2 and console["budget_ms"] == 300
    assert console["kinds"] == {"episodic": 44, "fact": 5, "profile": 1} and console["superseded"] >= 1
    assert [row["page"] for row in console["pages"]] == [
        "tenant", "timeline", "timeline, oldest page (1)", "entry: episode", "entry: superseded fact", "recall form",
        "recall (POST, k=10, explain)", "forget confirmation"]
    for row in [*console["pages"], console["download"]]:
        assert row["n"] == len(row["samples_ms"]) == 2 and 0 < row["p50"] <= row["p95"] <= row["max"]
        assert row["within_budget"] == (row["p95"] <= 300) and row["response_kb"] > 0
    assert all(row["nats_requests_min"] >= 1 for row in console["pages"] if row["page"] != "recall form")
    assert console["download"]["nats_requests_min"] >= 2
    assert console["all_within_budget"] == all(row["within_budget"] for row in console["pages"])
    assert "console pages for one user with 50 entries" in out
