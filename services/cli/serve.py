"""`engram up`, `ingestor`, `retriever`, `consolidator`: run services until a signal (or a failure) stops them."""
import typer

from engram_client import subjects
from services.cli.base import console, err, load_settings, run
from services.stack import Running, serve_until_signalled
from shared.settings import Settings


def _banner(state: Running, settings: Settings) -> None:
    prefix = settings.subject_prefix
    store = settings.qdrant_url or f"Qdrant Edge in {settings.qdrant_path.resolve()}"
    console.print(f"[bold green]engram is up[/bold green]  NATS {state.nats_url}  store: {store}")
    console.print(f"  publish turns   JetStream  {subjects.turns(prefix)}   "
                  "(Nats-Msg-Id: <tenant>:<conversation>:<turn>)")
    console.print(f"  close a window  JetStream  {subjects.flush(prefix)}")
    console.print(f"  recall          request    {subjects.recall(prefix)}")
    console.print(f"  entries         request    {subjects.entries(prefix)}")
    console.print(f"  forget          request    {subjects.forget(prefix)}")
    console.print(f"  events          subscribe  {subjects.events(prefix)}    dead letters: {subjects.dlq(prefix)}")
    console.print(f"  metrics/health  http://{settings.http_host}:{state.http_port}/metrics  /healthz  /readyz")
    console.print("Try it from another shell:")
    console.print(f"  [cyan]ENGRAM_NATS_URL={state.nats_url} .venv/bin/engram demo[/cyan]")
    console.print(f"  [cyan]ENGRAM_NATS_URL={state.nats_url} .venv/bin/engram recall 'Where did Maya travel?' "
                  "--tenant demo[/cyan]")
    console.print("From Python (engram-client: `pip install ./clients/python`, needs only nats-py and pydantic), "
                  "e.g. in [cyan].venv/bin/python -m asyncio[/cyan]:")
    console.print("  [cyan]>>> from engram_client import MemoryClient[/cyan]")
    console.print(f"  [cyan]>>> memory = await MemoryClient.connect({state.nats_url!r}, tenant='demo')[/cyan]")
    console.print("  [cyan]>>> print((await memory.recall('Where did Maya travel?')).context)[/cyan]")
    console.print(f"An agent over MCP: [cyan]ENGRAM_NATS_URL={state.nats_url} .venv/bin/engram mcp --tenant demo "
                  "--user maya[/cyan] (stdio; --transport http for streamable HTTP)")
    console.print("Ctrl-C stops it cleanly.")


def up(ingestors: int = typer.Option(1, min=1, help="ingestor instances in this process"),
       retrievers: int = typer.Option(1, min=1, help="retriever instances in this process")) -> None:
    """Run every service in one process (embedded NATS unless ENGRAM_NATS_URL is set)."""
    settings = load_settings()
    run(serve_until_signalled(settings, ingestors=ingestors, retrievers=retrievers, consolidators=1,
                              on_ready=lambda state: _banner(state, settings)))


def _external_only(settings: Settings, service: str) -> None:
    if not settings.nats_url:
        err.print(f"[red]engram {service} needs ENGRAM_NATS_URL[/red] (it joins a running NATS); "
                  "for one machine with nothing set up, use `engram up`")
        raise typer.Exit(2)
    if not settings.qdrant_url:
        err.print("[yellow]ENGRAM_QDRANT_URL is unset: using Qdrant Edge in the data folder, which only one process "
                  "can open; set it to run replicas[/yellow]")


def ingestor() -> None:
    """Run one ingestor (start as many as you like against the same NATS and Qdrant)."""
    settings = load_settings()
    _external_only(settings, "ingestor")
    run(serve_until_signalled(settings, ingestors=1, retrievers=0, consolidators=0,
                              on_ready=lambda s: console.print(f"ingestor consuming from {s.nats_url}")))


def retriever() -> None:
    """Run one retriever (queue group: start as many as you like)."""
    settings = load_settings()
    _external_only(settings, "retriever")
    run(serve_until_signalled(settings, ingestors=0, retrievers=1, consolidators=0,
                              on_ready=lambda s: console.print(f"retriever answering on {s.nats_url}")))


def consolidator() -> None:
    """Run one consolidator (queue group: start as many as you like)."""
    settings = load_settings()
    _external_only(settings, "consolidator")
    run(serve_until_signalled(settings, ingestors=0, retrievers=0, consolidators=1,
                              on_ready=lambda s: console.print(f"consolidator answering on {s.nats_url}")))
