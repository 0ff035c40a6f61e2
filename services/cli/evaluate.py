"""`engram eval locomo`: publish LoCoMo conversations through NATS, ask every question, score against baselines."""
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar, get_args

import typer
from rich.table import Table

from engram_client import MemoryClient
from services.cli import output
from services.cli.base import connect_client, console, err, load_settings, run
from services.cli.embedded import embedded_stack
from shared.embedding import open_embedder
from shared.evaluation import curve, locomo, locomo_run, multihop, multihop_run, updates, updates_run
from shared.evaluation import report as reporting
from shared.evaluation.settings import EvalSettings
from shared.settings import Settings

# An evaluation's embedded engram runs no scheduled consolidation (a slot 100 years long): the figures must not depend
# on whether the run crosses the scheduler's hourly slot. One that did consolidated mid-evaluation, and retention (age
# on the owner's clock) forgot the crowd variants' oldest stories while their turns were still awaited. `eval updates`
# consolidates when it means to, by request.
NO_SCHEDULED_CONSOLIDATION = {"consolidate_interval_s": 100 * 365 * 86_400.0}


app = typer.Typer(help="Measure retrieval quality against baselines.", no_args_is_help=True)
BUDGETS_HELP = ("comma list of token budgets (e.g. 500,1000,2000,4000): all-evidence recall against tokens for engram "
                "(no k) and the windowed baselines, written as a table, JSON and an SVG plot")


def parse_budgets(value: str | None, *, k: object = None, budget: object = None) -> list[int] | None:
    """The --budgets list, or None without it; a usage error (exit 2) names what is wrong, and refuses -k or
    --budget beside it (the curve asks every budget with no k)."""
    if value is None:
        return None
    try:
        budgets = curve.parse_budgets(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--budgets") from None
    given = [name for name, value in (("-k", k), ("--budget", budget)) if value is not None]
    if given:
        raise typer.BadParameter(f"measures every budget with no k: leave out {' and '.join(given)}",
                                 param_hint="--budgets")
    return budgets


async def _eval(settings: Settings, files: list[Path], ks: list[int], mode: str, budget: int | None,
                out: Path) -> None:
    embedder = open_embedder(settings)
    try:
        result = await _against(settings, "eval", lambda client_for: locomo_run.run(
            client_for, settings, files, ks, mode, embedder, budget, progress=_progress))
    finally:
        await embedder.close()
    output.eval_tables(result)
    json_path, md_path = reporting.write(result, out)
    console.print(f"wrote {json_path} and {md_path}")


@app.command("locomo")
def eval_locomo(files: Annotated[list[Path] | None, typer.Argument(help="LoCoMo JSON files (default: every file "
                                                                         "in ENGRAM_LOCOMO_DIR)")] = None,
                k: Annotated[list[int] | None, typer.Option("-k", min=1, max=100,
                                                            help="k to score at; repeat for several")] = None,
                mode: str = typer.Option("fast", "--mode", help="fast or deep"),
                budget: int | None = typer.Option(None, "--budget", help="token_budget of every recall"),
                budgets: str | None = typer.Option(None, "--budgets", help=BUDGETS_HELP),
                out: Path = typer.Option(Path("eval-out"), "--out",  # noqa: B008
                                         help="folder for report.json and report.md (curve.* with --budgets)")) -> None:
    """Publish LoCoMo conversations through NATS, ask every question, and score engram against baselines."""
    curve_budgets = parse_budgets(budgets, k=k, budget=budget)
    settings = load_settings()
    folder = EvalSettings().locomo_dir
    paths = files or locomo.files(folder)
    if not paths:
        err.print(f"[red]no LoCoMo files in {folder.resolve()}[/red] (set ENGRAM_LOCOMO_DIR)")
        raise typer.Exit(2)
    if curve_budgets:
        run(_curve_locomo(settings, paths, curve_budgets, mode, out))
        return
    run(_eval(settings, paths, sorted(set(k or [1, 5, 10, 20])), mode, budget, out))


R = TypeVar("R")
ClientFor = Callable[[str], Awaitable[MemoryClient]]


async def _against(settings: Settings, name: str, evaluate: Callable[[ClientFor], Awaitable[R]]) -> R:
    """Run an evaluation against ENGRAM_NATS_URL (whose schedule is its own), or an embedded stack started for it
    (`name` its folder) with no scheduled consolidation."""
    async def run_at(url: str) -> R:
        async def client_for(tenant: str) -> MemoryClient:
            return await connect_client(url, tenant, settings.subject_prefix, timeout_s=60)

        return await evaluate(client_for)

    if settings.nats_url:
        return await run_at(settings.nats_url)
    async with embedded_stack(settings, name, **NO_SCHEDULED_CONSOLIDATION) as state:
        return await run_at(state.nats_url)


def _progress(message: str) -> None:
    console.print(f"[dim]{message}[/dim]")


def _write_curve(result: curve.Curve, out: Path, stem: str) -> None:
    output.curve_table(result)
    paths = curve.write(result, out, stem)
    console.print("wrote " + ", ".join(str(p) for p in paths))


async def _curve_locomo(settings: Settings, files: list[Path], budgets: list[int], mode: str, out: Path) -> None:
    embedder = open_embedder(settings)
    try:
        result = await _against(settings, "eval", lambda client_for: locomo_run.run_curve(
            client_for, settings, files, budgets, mode, embedder, progress=_progress))
    finally:
        await embedder.close()
    _write_curve(result, out, "curve")


async def _curve_multihop(settings: Settings, split: multihop.Split, budgets: list[int], mode: str,
                          variant: multihop.Variant, out: Path) -> None:
    stories = variant.stories(split)
    embedder = open_embedder(settings)
    try:
        result = await _against(settings, "eval-multihop", lambda client_for: multihop_run.run_curve(
            client_for, stories, split, budgets, mode, embedder, settings, progress=_progress))
    finally:
        await embedder.close()
    _write_curve(result, out, f"multihop-{variant.name(split)}-curve")


async def _eval_updates(settings: Settings, split: updates.Split, mode: str, k: int, consolidate: bool,
                        budget: int | None, out: Path) -> None:
    stories = updates.load(updates.split_path(split))
    result = await _against(settings, "eval-updates", lambda client_for: updates_run.run(
        client_for, stories, split, k=k, mode=mode, consolidate=consolidate, token_budget=budget,
        progress=_progress))
    output.updates_tables(result)
    out.mkdir(parents=True, exist_ok=True)
    path = out / (f"updates-{split}.json" if budget is None else f"updates-{split}-budget{budget}.json")
    path.write_text(result.model_dump_json(indent=1), encoding="utf-8")
    console.print(f"wrote {path}")


_HALVES = get_args(updates.Split)
_MEASURE_ONLY = ("test", "within-test")
_TUNING = ", ".join(h for h in _HALVES if h not in _MEASURE_ONLY)


def _check_split(split: str) -> None:
    """Exit with a clear message unless `split` names a half of the update stories."""
    if split not in _HALVES:
        err.print(f"[red]--split must be one of {', '.join(_HALVES)}, not {split!r}[/red]")
        raise typer.Exit(2)


@app.command("updates")
def eval_updates(split: str = typer.Option("dev", "--split",
                                          help=f"{_TUNING} (tune on them) or {' or '.join(_MEASURE_ONLY)} "
                                               "(measure only)"),
                 mode: str = typer.Option("fast", "--mode", help="fast or deep"),
                 k: int = typer.Option(10, "-k", min=1, max=100, help="entries per recall"),
                 consolidate: bool = typer.Option(True, "--consolidate/--no-consolidate",
                                                  help="run the consolidation jobs before asking"),
                 budget: int | None = typer.Option(None, "--budget", min=1,
                                                   help="token_budget of every recall instead of k: the entries "
                                                        "that fit it"),
                 out: Path = typer.Option(Path("eval-out"), "--out", help="folder for updates-<split>.json")) -> None:  # noqa: B008
    """Publish the update stories through NATS, consolidate, ask about now, before and what never changed."""
    _check_split(split)
    settings = load_settings()
    run(_eval_updates(settings, split, mode, k, consolidate, budget, out))  # type: ignore[arg-type]


@app.command("story")
def eval_story(story_id: str = typer.Argument(help="an update story's id, e.g. en-015"),
               out: Path = typer.Argument(help="JSONL file of its turns, for `engram ingest`"),  # noqa: B008
               split: str = typer.Option("dev", "--split",
                                         help=f"the half it is in ({_TUNING} or test)")) -> None:
    """Write one update story's turns as JSONL (user id `<id>`), to ingest it and look at a recall with --explain."""
    _check_split(split)
    stories = {s.id: s for s in updates.load(updates.split_path(split))}  # type: ignore[arg-type]
    story = stories.get(story_id)
    if story is None:
        err.print(f"[red]no story {story_id!r} in the {split} half[/red]")
        raise typer.Exit(2)
    turns = [t for session in story.turns() for t in session]
    out.write_text("".join(t.model_dump_json(exclude_none=True) + "\n" for t in turns), encoding="utf-8")
    questions = "\n".join(f"  {q.kind}: {q.query}" for q in story.questions)
    console.print(f"wrote {len(turns)} turns of {story.id} (user {story.user.user_id}) to {out}; its questions:\n"
                  + questions)


async def _eval_multihop(settings: Settings, split: multihop.Split, mode: str, k: int | None, budget: int | None,
                         variant: multihop.Variant, out: Path) -> None:
    stories = variant.stories(split)
    result = await _against(settings, "eval-multihop", lambda client_for: multihop_run.run(
        client_for, stories, split, k=k, token_budget=budget, mode=mode, progress=_progress))
    result = result.model_copy(update={"crowd": variant.crowd, "distractors": variant.distractors,
                                       "first_person": variant.first_person, "verbose": variant.verbose})
    table = Table(title=f"multi-session stories, {split} half{variant.title()}: k={k or 'as many as fit'}, "
                        f"token budget {budget}")
    for column in ("questions", "group", "all evidence", "any evidence", "turn recall", "in order", "context tokens"):
        table.add_column(column, justify="left" if column == "group" else "right")
    rows = [("all", result.overall), *result.by_type.items(), *result.by_language_type.items()]
    for name, f in rows:
        table.add_row(str(f.questions), name, f"{f.all_evidence:.3f}", f"{f.any_evidence:.3f}",
                      f"{f.turn_recall:.3f}", "" if f.in_order is None else f"{f.in_order:.3f}",
                      f"{f.mean_context_tokens:.0f}")
    console.print(table)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"multihop-{variant.name(split)}.json"
    path.write_text(result.model_dump_json(indent=1), encoding="utf-8")
    console.print(f"wrote {path}")


@app.command("multihop")
def eval_multihop(split: str = typer.Option("dev", "--split", help="dev (tune on it) or test (measure only)"),
                  mode: str = typer.Option("fast", "--mode", help="fast or deep"),
                  k: int | None = typer.Option(None, "-k", min=1, max=100,
                                               help="entries per recall at most (default: as many as fit the "
                                                    "budget; 10 without one)"),
                  budget: int | None = typer.Option(2000, "--budget",
                                                    help="token_budget of every recall (without --budgets)"),
                  budgets: str | None = typer.Option(None, "--budgets", help=BUDGETS_HELP),
                  crowd: int = typer.Option(1, "--crowd", min=1, max=10,
                                            help="stories a user: every N stories of a language under one user, "
                                                 "each question's own among the others' (a harder variant)"),
                  distract: bool = typer.Option(False, "--distractors",
                                                help="add each story's distractor sessions (same user, same "
                                                     "people and words, answering nothing): a harder variant"),
                  first_person: bool = typer.Option(False, "--first-person",
                                                    help="ask each question as its user would, in the first "
                                                         "person (\"what did I…\", \"我…\")"),
                  verbose: int = typer.Option(0, "--verbose", min=0, max=20000,
                                              help="lengthen each assistant turn to at least this many characters "
                                                   "with other stories' replies (a verbose assistant)"),
                  out: Path = typer.Option(Path("eval-out"), "--out",  # noqa: B008
                                           help="folder for multihop-<variant>.json, e.g. "
                                                "multihop-test-distractors-firstperson-crowd4.json "
                                                "(…-curve.* with --budgets)")) -> None:
    """Publish the multi-session stories through NATS and ask their multi-hop, ordering and single-hop questions:
    all-evidence turn recall within the budget, and ordering questions answered in chronological order."""
    curve_budgets = parse_budgets(budgets, k=k)
    if split not in get_args(multihop.Split):
        err.print(f"[red]--split must be dev or test, not {split!r}[/red]")
        raise typer.Exit(2)
    settings = load_settings()
    variant = multihop.Variant(crowd, distract, first_person, verbose)
    if curve_budgets:
        run(_curve_multihop(settings, split, curve_budgets, mode, variant, out))  # type: ignore[arg-type]
        return
    # With a budget and no -k the budget alone decides how many entries (RecallRequest.limit); without one, 10.
    run(_eval_multihop(settings, split, mode, k, budget, variant, out))  # type: ignore[arg-type]
