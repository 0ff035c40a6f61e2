"""The client commands: `engram ingest`, `recall`, `entries`, `forget`, `consolidate` (they speak the contract,
nothing else)."""
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engram_client import wait_until_stored
from engram_client.contract import (
    ConsolidateRequest,
    ConsolidationJob,
    EntriesRequest,
    Forget,
    RecallFilters,
    RecallRequest,
)
from services.cli import output
from services.cli.base import NatsOpt, TenantOpt, connect_client, console, load_settings, nats_url, run
from services.cli.files import read_turns


async def publish_file(url: str, tenant: str, path: Path, wait: bool, prefix: str, timeout_s: float) -> None:
    """Publish every turn of a file, flush each conversation, and optionally wait until all are recallable."""
    turns = read_turns(path)
    conversations = list(dict.fromkeys(t.conversation_id for t in turns))
    started = time.perf_counter()
    async with await connect_client(url, tenant, prefix) as client:
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


def ingest(file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSONL of turns or LoCoMo JSON")],
           tenant: TenantOpt = "default", nats: NatsOpt = None,
           wait: bool = typer.Option(False, "--wait", help="wait until every turn is recallable"),
           timeout_s: float = typer.Option(600.0, "--timeout", help="how long --wait may take")) -> None:
    """Publish a file of turns through JetStream (deduplicated), flush each conversation, optionally wait."""
    settings = load_settings()
    run(publish_file(nats_url(settings, nats), tenant, file, wait, settings.subject_prefix, timeout_s))


async def _recall(url: str, tenant: str, prefix: str, fields: dict[str, object], as_json: bool) -> None:
    request = RecallRequest.model_validate(fields)  # here, so a bad option is reported like any invalid request
    async with await connect_client(url, tenant, prefix) as client:
        reply = await client.recall(request)
    if as_json:
        console.print_json(reply.model_dump_json())
    else:
        output.recall_table(reply, request.explain)


def recall(query: str, tenant: TenantOpt = "default", nats: NatsOpt = None,
           user: str | None = typer.Option(None, "--user"),
           conversation: str | None = typer.Option(None, "--conversation"),
           k: int | None = typer.Option(None, "-k", help="entries at most (10 unless --budget is given alone)"),
           budget: int | None = typer.Option(None, "--budget", help="token budget of the rendered context: with it "
                                             "alone, the best entries that fit"),
           person: list[str] = typer.Option([], "--person", help="only entries naming this person"),  # noqa: B008
           working_memory: bool = typer.Option(False, "--working-memory"),
           explain: bool = typer.Option(False, "--explain"), as_json: bool = typer.Option(False, "--json")) -> None:
    """Ask engram for the memories that matter to QUERY."""
    settings = load_settings()
    fields: dict[str, object] = {
        "query": query, "user_id": user, "conversation_id": conversation, "k": k, "token_budget": budget,
        "include_working_memory": working_memory, "explain": explain,
        "filters": RecallFilters(persons=person) if person else None}
    run(_recall(nats_url(settings, nats), tenant, settings.subject_prefix, fields, as_json))


async def _entries(url: str, tenant: str, prefix: str, request: EntriesRequest, as_json: bool) -> None:
    async with await connect_client(url, tenant, prefix) as client:
        reply = await client.entries(request)
    if as_json:
        console.print_json(reply.model_dump_json())
        return
    output.entries_table(reply.entries)
    if reply.next_cursor:
        console.print(f"[dim]more: --cursor {reply.next_cursor}[/dim]")


def entries(tenant: TenantOpt = "default", nats: NatsOpt = None,
            ids: list[str] = typer.Option([], "--id", help="get these entries"),  # noqa: B008
            history: str | None = typer.Option(None, "--history", help="an entry and what it merged/superseded"),
            user: str | None = typer.Option(None, "--user"),
            conversation: str | None = typer.Option(None, "--conversation"),
            limit: int = typer.Option(50, "--limit"), cursor: str | None = typer.Option(None, "--cursor"),
            as_json: bool = typer.Option(False, "--json")) -> None:
    """List, get or trace stored entries (admin)."""
    settings = load_settings()
    if history:
        request = EntriesRequest(op="history", ids=[history])
    elif ids:
        request = EntriesRequest(op="get", ids=ids)
    else:
        request = EntriesRequest(op="list", user_id=user, conversation_id=conversation, limit=limit, cursor=cursor)
    run(_entries(nats_url(settings, nats), tenant, settings.subject_prefix, request, as_json))


async def _forget(url: str, tenant: str, prefix: str, fields: dict[str, object], as_json: bool) -> int:
    request = Forget.model_validate(fields)  # here, so a bad combination of options is reported as invalid
    async with await connect_client(url, tenant, prefix, timeout_s=60) as client:
        receipt = await client.forget(user_id=request.user_id, conversation_id=request.conversation_id,
                                      entry_ids=request.entry_ids)
    if as_json:
        console.print_json(receipt.model_dump_json())
    else:
        output.forget_receipt(receipt)
    return 0 if receipt.verified else 1


def forget(tenant: TenantOpt = "default", nats: NatsOpt = None,
           user: str | None = typer.Option(None, "--user", help="everything of this user"),
           conversation: str | None = typer.Option(None, "--conversation", help="everything of this conversation"),
           ids: list[str] = typer.Option([], "--id", help="these entries"),  # noqa: B008
           as_json: bool = typer.Option(False, "--json")) -> None:
    """Delete a user's, a conversation's or some entries' data everywhere and print the receipt (exit 1 if the
    check afterwards still found something)."""
    settings = load_settings()
    fields: dict[str, object] = {"user_id": user, "conversation_id": conversation, "entry_ids": ids or None}
    run(_forget(nats_url(settings, nats), tenant, settings.subject_prefix, fields, as_json))


async def _consolidate(url: str, tenant: str, prefix: str, user: str | None, jobs: list[ConsolidationJob],
                       as_json: bool) -> None:
    async with await connect_client(url, tenant, prefix) as client:
        summary = await client.consolidate(user_id=user, jobs=jobs)
    if as_json:
        console.print_json(summary.model_dump_json())
    else:
        output.consolidation_summary(summary)


def consolidate(tenant: TenantOpt = "default", nats: NatsOpt = None,
                user: str | None = typer.Option(None, "--user", help="only this user's memory"),
                jobs: list[str] = typer.Option([], "--job", help="score, supersede, merge, forget or profile "  # noqa: B008
                                               "(default: all)"),
                as_json: bool = typer.Option(False, "--json")) -> None:
    """Run the consolidation jobs for a tenant now and print what they changed."""
    settings = load_settings()
    request = ConsolidateRequest.model_validate({"user_id": user, "jobs": jobs})  # bad job names are reported
    run(_consolidate(nats_url(settings, nats), tenant, settings.subject_prefix, request.user_id, request.jobs,
                     as_json))


async def _rebuild(url: str, prefix: str, into: str, window_turns: int | None, timeout_s: float,
                   as_json: bool) -> None:
    async with await connect_client(url, "operator", prefix) as client:
        with console.status(f"rebuilding into {into!r} (recall keeps answering from the live build)"):
            report = await client.rebuild(into, window_turns=window_turns, timeout_s=timeout_s)
    if as_json:
        console.print_json(report.model_dump_json())
        return
    console.print(f"[bold green]{into} is live[/bold green] (replaced {report.replaced}, kept for a rollback) "
                  f"after {report.seconds:.1f}s")
    console.print(f"  {report.turns_replayed} turns replayed into {report.windows} windows of up to "
                  f"{report.window_turns} turns: {report.entries_written} entries")
    console.print(f"  {report.entries_carried} entries carried over as they were; {report.turns_left_to_live} "
                  f"turns left to the ingestor; {report.unreadable} unreadable messages skipped; "
                  f"{report.forgets_applied_again} forgets applied again")


def rebuild(into: str = typer.Option(..., "--into", help="name of the new build (letters, digits, _ and -)"),
            window_turns: int | None = typer.Option(None, "--window-turns", min=1, max=64,
                                                    help="window size of the new build (default: the consolidator's "
                                                         "ENGRAM_WINDOW_TURNS)"),
            nats: NatsOpt = None, timeout_s: float = typer.Option(3600.0, "--timeout", help="seconds to wait"),
            as_json: bool = typer.Option(False, "--json")) -> None:
    """Derive the long-term memory again from the turns the stream retains into a new build, then switch to it
    atomically (recall keeps answering throughout)."""
    settings = load_settings()
    run(_rebuild(nats_url(settings, nats), settings.subject_prefix, into, window_turns, timeout_s, as_json))


def contract(out: Annotated[Path, typer.Option("--out", help="the contract folder")] = Path("contract"),
             check: bool = typer.Option(False, "--check", help="write nothing; fail if the files differ")) -> None:
    """Write the published contract from the pydantic models: a JSON Schema per message (`schemas/`) and the
    AsyncAPI 3.0 document of the NATS API (`asyncapi.yaml`)."""
    from services import contract as published  # FastStream's AsyncAPI code loads only for this command

    if check:
        stale = published.differences(out)
        if stale:
            console.print(f"[red]{len(stale)} contract files differ from the models[/red] in {out}: "
                          f"{', '.join(stale)}; run `engram contract` (make contract)")
            raise typer.Exit(1)
        console.print(f"the contract in {out} matches the models")
        return
    written = published.write(out)
    console.print(f"wrote {len(written)} contract files into {out}")
