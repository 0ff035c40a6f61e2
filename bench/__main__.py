"""`python -m bench` (`make bench`): run the benchmarks, print tables, write JSON and PNG plots."""
import argparse
import asyncio
import logging
from pathlib import Path
from typing import Any

from rich.console import Console

from bench import console, consolidation, pipeline, report, scale, sweep
from shared.evaluation import locomo
from shared.evaluation.machine import describe
from shared.evaluation.settings import EvalSettings
from shared.settings import Settings

SAMPLE = Path(__file__).parents[1] / "tests" / "fixtures" / "mini_locomo.json"


async def main(args: argparse.Namespace) -> dict[str, Any]:
    """Run what was asked and return the results."""
    settings = Settings()
    results: dict[str, Any] = {"machine": describe()}
    if "pipeline" in args.only:
        source = args.conversation or (EvalSettings().locomo_dir / "26.json")
        if not source.exists():
            source = SAMPLE  # LoCoMo is never vendored; the tiny sample keeps the bench runnable
        results["conversation"] = str(source)
        results["pipeline"] = await pipeline.run(locomo.load(source), settings,
                                                 [int(c) for c in args.concurrency.split(",")], args.rounds,
                                                 args.load_turns, args.budget or None)
    if "sweep" in args.only:
        results["sweep"] = await sweep.run(args.sweep_keys)
    if "scale" in args.only:
        results["scale"] = await scale.run([int(s) for s in args.sizes.split(",")], settings, args.scale_queries)
    if "consolidation" in args.only:
        results["consolidation"] = await asyncio.to_thread(
            consolidation.run, [int(s) for s in args.consolidation_sizes.split(",")], args.consolidation_tenants)
    if "console" in args.only:
        results["console"] = await console.run(args.console_entries, args.console_rounds, settings)
    return results


def cli() -> None:
    """Parse arguments, run, report."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", default="pipeline,sweep,scale",
                        help="any of pipeline, sweep, scale, consolidation, console")
    parser.add_argument("--conversation", type=Path, help="LoCoMo file (default: 26.json in ENGRAM_LOCOMO_DIR)")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--rounds", type=int, default=40,
                        help="recalls per client above 1 client (1 client asks every question once, as the floor)")
    parser.add_argument("--load-turns", type=int, default=2000,
                        help="short turns of another user ingested while one client recalls")
    parser.add_argument("--budget", type=int, default=2000,
                        help="token budget of the one-client recall by budget alone (0: not measured)")
    parser.add_argument("--sweep-keys", type=int, default=100_000, help="finished conversations in working memory")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--scale-queries", type=int, default=scale.QUERIES, help="queries per scale figure")
    parser.add_argument("--consolidation-sizes", default="100000,1000000",
                        help="entries of the one tenant the consolidation benchmark fills")
    parser.add_argument("--consolidation-tenants", type=int, default=consolidation.SCHEDULER_TENANTS,
                        help="tenants the scheduler's pass goes over")
    parser.add_argument("--console-entries", type=int, default=2000,
                        help="entries of the one user whose console pages are timed")
    parser.add_argument("--console-rounds", type=int, default=30, help="timed rounds of every console page")
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    terminal = Console()
    results = asyncio.run(main(args))
    report.print_tables(results, terminal)
    for path in report.write(results, args.out):
        terminal.print(f"wrote {path}")


if __name__ == "__main__":
    cli()
