"""The `engram` command: run the services, ingest files, recall, inspect entries, and a demo."""
import asyncio
import logging
import os
import statistics
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from services.runtime import Running, running, serve_until_signalled
from shared import subjects
from shared.client import MemoryClient, wait_until_stored
from shared.contract import EntriesRequest, EntryView, RecallFilters, RecallResponse
from shared.errors import EngramError
from shared.evaluation.locomo_run import EvalReport
from shared.settings import Settings
from shared.sources import read_turns

app = typer.Typer(help="engram: conversational memory over NATS and Qdrant.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
console = Console()
err = Console(stderr=True)

TenantOpt = Annotated[str, typer.Option("--tenant", "-t", help="tenant id", envvar="ENGRAM_TENANT")]
NatsOpt = Annotated[str | None, typer.Option("--nats-url", help="NATS URL (default: ENGRAM_NATS_URL or the "
                                                                "embedded server's address)")]


class _KeyValueFormatter(logging.Formatter):
    """One line per record: time, level, logger, message, then the record's extra fields as key=value."""

    _std = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = {k: v for k, v in record.__dict__.items() if k not in self._std}
        return line + "".join(f" {k}={v}" for k, v in extras.items())


def _settings() -> Settings:
    try:
        settings = Settings()
    except Exception as exc:  # pydantic's message already says which variable and how to fix it
        err.print(f"[red]configuration error:[/red] {exc}")
        raise typer.Exit(2) from exc
    handler = logging.StreamHandler()
    handler.setFormatter(_KeyValueFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=settings.log_level.upper(), handlers=[handler], force=True)
    logging.getLogger("faststream").setLevel(logging.WARNING)
    return settings


def _nats_url(settings: Settings, given: str | None) -> str:
    return given or settings.nats_url or f"nats://127.0.0.1:{settings.nats_port or 4222}"


def _run(coro: object) -> None:
    try:
        asyncio.run(coro)  # type: ignore[arg-type]
    except EngramError as exc:
        err.print(f"[red]{type(exc).__name__}:[/red] {exc}")
        raise typer.Exit(1) from exc


def _banner(state: Running, settings: Settings) -> None:
    prefix = settings.subject_prefix
    store = settings.qdrant_url or f"Qdrant Edge in {settings.qdrant_path.resolve()}"
    console.print(f"[bold green]engram is up[/bold green]  NATS {state.nats_url}  store: {store}")
    console.print(f"  publish turns   JetStream  {subjects.turns(prefix)}   "
                  "(Nats-Msg-Id: <tenant>:<conversation>:<turn>)")
    console.print(f"  close a window  JetStream  {subjects.flush(prefix)}")
    console.print(f"  recall          request    {subjects.recall(prefix)}")
    console.print(f"  entries         request    {subjects.entries(prefix)}")
    console.print(f"  events          subscribe  {subjects.events(prefix)}    dead letters: {subjects.dlq(prefix)}")
    console.print(f"  metrics/health  http://{settings.http_host}:{state.http_port}/metrics  /healthz  /readyz")
    console.print("Try it from another shell:")
    console.print(f"  [cyan]ENGRAM_NATS_URL={state.nats_url} .venv/bin/engram demo[/cyan]")
    console.print(f"  [cyan]ENGRAM_NATS_URL={state.nats_url} .venv/bin/engram recall 'Where did Maya travel?' "
                  "--tenant demo[/cyan]")
    console.print(f"  [cyan]nats req {subjects.recall(prefix, 'demo')} '{{\"query\": \"Where did Maya travel?\"}}' "
                  f"-s {state.nats_url}[/cyan]")
    console.print("Ctrl-C stops it cleanly.")


@app.command()
def up(ingestors: int = typer.Option(1, min=1, help="ingestor instances in this process"),
       retrievers: int = typer.Option(1, min=1, help="retriever instances in this process")) -> None:
    """Run every service in one process (embedded NATS unless ENGRAM_NATS_URL is set)."""
    settings = _settings()
    _run(serve_until_signalled(settings, ingestors=ingestors, retrievers=retrievers,
                               on_ready=lambda state: _banner(state, settings)))


def _external_only(settings: Settings, service: str) -> None:
    if not settings.nats_url:
        err.print(f"[red]engram {service} needs ENGRAM_NATS_URL[/red] (it joins a running NATS); "
                  "for one machine with nothing set up, use `engram up`")
        raise typer.Exit(2)
    if not settings.qdrant_url:
        err.print("[yellow]ENGRAM_QDRANT_URL is unset: using Qdrant Edge in the data folder, which only one process "
                  "can open; set it to run replicas[/yellow]")


@app.command()
def ingestor() -> None:
    """Run one ingestor (start as many as you like against the same NATS and Qdrant)."""
    settings = _settings()
    _external_only(settings, "ingestor")
    _run(serve_until_signalled(settings, ingestors=1, retrievers=0,
                               on_ready=lambda s: console.print(f"ingestor consuming from {s.nats_url}")))


@app.command()
def retriever() -> None:
    """Run one retriever (queue group: start as many as you like)."""
    settings = _settings()
    _external_only(settings, "retriever")
    _run(serve_until_signalled(settings, ingestors=0, retrievers=1,
                               on_ready=lambda s: console.print(f"retriever answering on {s.nats_url}")))


async def _ingest(url: str, tenant: str, path: Path, wait: bool, prefix: str, timeout_s: float) -> None:
    turns = read_turns(path)
    conversations = list(dict.fromkeys(t.conversation_id for t in turns))
    started = time.perf_counter()
    async with await MemoryClient.connect(url, tenant, prefix) as client:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console) as progress:
            task = progress.add_task("publishing turns", total=len(turns))
            for turn in turns:
                await client.publish_turn(turn)
                progress.advance(task)
            for conversation_id in conversations:
                await client.flush(conversation_id)
        published = time.perf_counter() - started
        console.print(f"published {len(turns)} turns in {len(conversations)} conversations in {published:.1f}s")
        if wait:
            with console.status("waiting until every turn is stored"):
                await wait_until_stored(client, turns, timeout_s=timeout_s)
            total = time.perf_counter() - started
            console.print(f"all {len(turns)} turns recallable after {total:.1f}s "
                          f"({len(turns) / total:.1f} turns/s end to end)")


@app.command()
def ingest(file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSONL of turns or LoCoMo JSON")],
           tenant: TenantOpt = "default", nats_url: NatsOpt = None,
           wait: bool = typer.Option(False, "--wait", help="wait until every turn is recallable"),
           timeout_s: float = typer.Option(600.0, "--timeout", help="how long --wait may take")) -> None:
    """Publish a file of turns through JetStream (deduplicated), flush each conversation, optionally wait."""
    settings = _settings()
    _run(_ingest(_nats_url(settings, nats_url), tenant, file, wait, settings.subject_prefix, timeout_s))


def _print_recall(reply: RecallResponse, explain: bool) -> None:
    table = Table(show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("memory")
    table.add_column("sources")
    for i, entry in enumerate(reply.entries, start=1):
        text = entry.text
        if explain and entry.explanation:
            x = entry.explanation
            text += (f"\n[dim]dense #{x.dense_rank} ({x.dense_score}) sparse #{x.sparse_rank} ({x.sparse_score}) "
                     f"terms {x.matched_terms} boosts {x.boosts}[/dim]")
        table.add_row(str(i), f"{entry.score:.3f}", text, ", ".join(entry.source_turn_ids))
    console.print(table)
    t = reply.timings_ms
    console.print(f"[dim]{len(reply.entries)} entries, context {reply.context_tokens} tokens, "
                  f"embed {t.embed:.1f} ms, search {t.search:.1f} ms, total {t.total:.1f} ms[/dim]")


async def _recall(url: str, tenant: str, prefix: str, fields: dict[str, object], as_json: bool,
                  explain: bool) -> None:
    async with await MemoryClient.connect(url, tenant, prefix) as client:
        reply = await client.recall(**fields)  # type: ignore[arg-type]
    if as_json:
        console.print_json(reply.model_dump_json())
    else:
        _print_recall(reply, explain)


@app.command()
def recall(query: str, tenant: TenantOpt = "default", nats_url: NatsOpt = None,
           user: str | None = typer.Option(None, "--user"), conversation: str | None = typer.Option(
               None, "--conversation"), k: int = typer.Option(10, "-k"),
           budget: int | None = typer.Option(None, "--budget", help="token budget of the rendered context"),
           person: list[str] = typer.Option([], "--person", help="only entries naming this person"),  # noqa: B008
           working_memory: bool = typer.Option(False, "--working-memory"),
           explain: bool = typer.Option(False, "--explain"), as_json: bool = typer.Option(False, "--json")) -> None:
    """Ask engram for the memories that matter to QUERY."""
    settings = _settings()
    fields: dict[str, object] = {"query": query, "user_id": user, "conversation_id": conversation, "k": k,
                                 "token_budget": budget, "include_working_memory": working_memory,
                                 "explain": explain}
    if person:
        fields["filters"] = RecallFilters(persons=person)
    _run(_recall(_nats_url(settings, nats_url), tenant, settings.subject_prefix, fields, as_json, explain))


def _print_entries(entries: list[EntryView]) -> None:
    table = Table(show_lines=True)
    for column in ("id", "conversation", "occurred", "text", "sources"):
        table.add_column(column)
    for e in entries:
        table.add_row(e.id, e.conversation_id, e.occurred_at.isoformat(), e.text, ", ".join(e.source_turn_ids))
    console.print(table)


async def _entries(url: str, tenant: str, prefix: str, fields: dict[str, object], as_json: bool) -> None:
    async with await MemoryClient.connect(url, tenant, prefix) as client:
        reply = await client.entries(EntriesRequest.model_validate(fields))
    if as_json:
        console.print_json(reply.model_dump_json())
    else:
        _print_entries(reply.entries)
        if reply.next_cursor:
            console.print(f"[dim]more: --cursor {reply.next_cursor}[/dim]")


@app.command()
def entries(tenant: TenantOpt = "default", nats_url: NatsOpt = None,
            ids: list[str] = typer.Option([], "--id", help="get these entries"),  # noqa: B008
            history: str | None = typer.Option(None, "--history", help="an entry and what it merged/superseded"),
            user: str | None = typer.Option(None, "--user"),
            conversation: str | None = typer.Option(None, "--conversation"),
            limit: int = typer.Option(50, "--limit"), cursor: str | None = typer.Option(None, "--cursor"),
            as_json: bool = typer.Option(False, "--json")) -> None:
    """List, get or trace stored entries (admin)."""
    settings = _settings()
    fields: dict[str, object]
    if history:
        fields = {"op": "history", "ids": [history]}
    elif ids:
        fields = {"op": "get", "ids": ids}
    else:
        fields = {"op": "list", "user_id": user, "conversation_id": conversation, "limit": limit, "cursor": cursor}
    _run(_entries(_nats_url(settings, nats_url), tenant, settings.subject_prefix, fields, as_json))


DEMO_QUESTIONS = ["Where did Maya travel and why?", "What is Maya training for, and when is it?",
                  "What is the name of Maya's dog?", "Why does Maya need protein ideas?",
                  "Who did Maya meet at the conference?"]


async def _demo_against(url: str, settings: Settings, tenant: str) -> None:
    sample = Path(str(resources.files("services") / "samples" / "demo.jsonl"))
    await _ingest(url, tenant, sample, wait=True, prefix=settings.subject_prefix, timeout_s=120)
    latencies = []
    async with await MemoryClient.connect(url, tenant, settings.subject_prefix) as client:
        for question in DEMO_QUESTIONS:
            started = time.perf_counter()
            reply = await client.recall(question, k=2, user_id="user-maya")
            latencies.append((time.perf_counter() - started) * 1e3)
            console.rule(f"[bold]{question}")
            for entry in reply.entries:
                console.print(f"[green]{entry.score:.3f}[/green] {entry.text}\n")
    console.print(f"[dim]recall round trip: median {statistics.median(latencies):.1f} ms over "
                  f"{len(latencies)} questions[/dim]")


async def _demo(settings: Settings, given: str | None, tenant: str) -> None:
    url = _nats_url(settings, given)
    try:
        client = await MemoryClient.connect(url, tenant, settings.subject_prefix, timeout_s=2, reconnect_attempts=1)
        await client.entries(op="list", limit=1)
        await client.close()
    except EngramError:
        console.print(f"[yellow]no engram answers at {url}; starting an embedded one for the demo[/yellow]")
        logging.getLogger().setLevel(logging.WARNING)  # the demo prints its own story
        folder = Path(tempfile.mkdtemp(prefix="engram-demo-"))
        demo_settings = settings.model_copy(update={"data_dir": folder, "nats_url": None, "nats_port": 0,
                                                    "http_port": 0, "idle_timeout_s": 5.0})
        async with running(demo_settings) as state:
            await _demo_against(state.nats_url, demo_settings, tenant)
        return
    await _demo_against(url, settings, tenant)


@app.command()
def demo(tenant: TenantOpt = "demo", nats_url: NatsOpt = None) -> None:
    """Ingest a small bundled conversation and show a few recalls (starts engram if none answers)."""
    settings = _settings()
    _run(_demo(settings, nats_url, tenant))


eval_app = typer.Typer(help="Measure retrieval quality against baselines.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


def _print_report(report: EvalReport) -> None:
    from shared.evaluation.report import COLUMNS, table_rows

    conversations = sorted({s.conversation for s in report.scores})
    for k in report.ks:
        table = Table(title=f"LoCoMo evidence recall, mean of {', '.join(conversations)}, k = {k}")
        for column in COLUMNS:
            table.add_column(column, justify="left" if column == "system" else "right")
        for values in table_rows(report, k, short=True):
            table.add_row(*values)
        console.print(table)
    console.print(f"recall over NATS: p50 {report.latency.p50_ms:.1f} ms, p95 {report.latency.p95_ms:.1f} ms; "
                  + "; ".join(f"{i.conversation} ingested at {i.turns_per_s:.1f} turns/s" for i in report.ingest))


async def _eval(settings: Settings, files: list[Path], ks: list[int], mode: str, budget: int | None,
                out: Path) -> None:
    from shared.embedding import open_embedder
    from shared.evaluation import locomo_run
    from shared.evaluation import report as reporting

    embedder = open_embedder(settings)

    async def evaluate_against(url: str) -> EvalReport:
        async def client_for(tenant: str) -> MemoryClient:
            return await MemoryClient.connect(url, tenant, settings.subject_prefix, timeout_s=60)

        return await locomo_run.run(client_for, settings, files, ks, mode, embedder, budget,
                                    progress=lambda message: console.print(f"[dim]{message}[/dim]"))

    try:
        if settings.nats_url:
            result = await evaluate_against(settings.nats_url)
        else:
            with tempfile.TemporaryDirectory(prefix="engram-eval-") as folder:
                local = settings.model_copy(update={"data_dir": Path(folder), "nats_port": 0, "http_port": 0})
                logging.getLogger().setLevel(logging.WARNING)
                async with running(local) as state:
                    result = await evaluate_against(state.nats_url)
    finally:
        await embedder.close()
    _print_report(result)
    json_path, md_path = reporting.write(result, out)
    console.print(f"wrote {json_path} and {md_path}")


@eval_app.command("locomo")
def eval_locomo(files: Annotated[list[Path] | None, typer.Argument(help="LoCoMo JSON files (default: every file "
                                                                         "in ENGRAM_LOCOMO_DIR)")] = None,
                k: str = typer.Option("1,5,10,20", "-k", help="comma-separated k values"),
                mode: str = typer.Option("fast", "--mode", help="fast or deep"),
                budget: int | None = typer.Option(None, "--budget", help="token_budget of every recall"),
                out: Path = typer.Option(Path("eval-out"), "--out",  # noqa: B008
                                         help="folder for report.json and report.md")) -> None:
    """Publish LoCoMo conversations through NATS, ask every question, and score engram against baselines."""
    settings = _settings()
    from shared import locomo

    paths = files or locomo.files(settings.locomo_dir)
    if not paths:
        err.print(f"[red]no LoCoMo files in {settings.locomo_dir.resolve()}[/red] (set ENGRAM_LOCOMO_DIR)")
        raise typer.Exit(2)
    try:
        ks = sorted({int(x) for x in k.split(",") if x.strip()})
    except ValueError as exc:
        err.print(f"[red]-k takes comma-separated whole numbers, got {k!r}[/red]")
        raise typer.Exit(2) from exc
    if not ks or min(ks) < 1 or max(ks) > 100:
        err.print("[red]-k values must be between 1 and 100[/red]")
        raise typer.Exit(2)
    _run(_eval(settings, paths, ks, mode, budget, out))


def main() -> None:
    """Entry point of the `engram` console script."""
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    app()


if __name__ == "__main__":
    main()
