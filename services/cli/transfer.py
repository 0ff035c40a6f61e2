"""`engram export` and `engram import`: a tenant's or one user's memory to a portable JSON Lines file, and such a file
into a tenant of this or another deployment, with progress on the terminal (stderr, so an export to stdout stays
clean)."""
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engram_client.contract import ExportHeader
from engram_client.errors import InvalidRequest
from engram_client.portable import Progress as Done
from engram_client.portable import read_export
from services.cli.base import NatsOpt, TenantOpt, connect_client, err, load_settings, nats_url, run


class _Shown:
    """Entries and turns done so far, drawn as progress bars; called by the client as each page or batch is done."""

    def __init__(self, bar: Progress, what: str) -> None:
        self.bar = bar
        self.done = Done()
        self.entries = bar.add_task(f"{what} entries", total=None)
        self.turns = bar.add_task(f"{what} turns", total=None)

    def __call__(self, now: Done) -> None:
        self.done = Done(**vars(now))
        self.bar.update(self.entries, completed=now.entries, total=now.entries_total)
        self.bar.update(self.turns, completed=now.turns, total=now.turns_total)


@contextlib.contextmanager
def _shown(what: str) -> Iterator[_Shown]:
    """Progress bars on stderr for the block's duration."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err) as bar:
        yield _Shown(bar, what)


async def _export(url: str, tenant: str, prefix: str, user: str | None, out: Path | None) -> None:
    async with await connect_client(url, tenant, prefix, timeout_s=60) as client:
        with _shown("exporting") as shown:
            if out is None:
                await client.export_to(sys.stdout, user_id=user, on_progress=shown)
            else:  # written beside the target and renamed at the end, so a failed export leaves no half file
                partial = out.with_name(f".{out.name}.partial")
                try:
                    with partial.open("w", encoding="utf-8") as f:
                        await client.export_to(f, user_id=user, on_progress=shown)
                    os.replace(partial, out)
                finally:
                    partial.unlink(missing_ok=True)
    whose = f"user {user!r} of tenant {tenant!r}" if user else f"tenant {tenant!r}"
    turns = ("turns (still in working memory, or the user's own of entries other people also spoke in)" if user
             else "working-memory turns")
    err.print(f"exported {whose}: {shown.done.entries} entries and {shown.done.turns} {turns}"
              + (f" to {out}" if out else ""))


def export(tenant: TenantOpt = "default", nats: NatsOpt = None,
           user: str | None = typer.Option(None, "--user", help="only this user's memory"),
           out: Annotated[Path | None, typer.Option("--out", dir_okay=False,
                                                    help="the file to write (default: stdout)")] = None) -> None:
    """Write everything engram holds about a tenant (or one of its users) to a JSON Lines file: a header, every
    entry of every kind with its history and sources, and the turns still in working memory (no vectors). A user's
    file holds their words only: an entry other people also spoke in is replaced by the user's own turns of it."""
    settings = load_settings()
    run(_export(nats_url(settings, nats), tenant, settings.subject_prefix, user, out))


def _file_tenant(path: Path) -> str:
    """The tenant an export file's header names."""
    for _, line in read_export(path):
        if isinstance(line, ExportHeader):
            return line.tenant_id
        break
    raise InvalidRequest(f"{path} does not start with a header line: it is not an engram export")


async def _import(url: str, tenant: str | None, prefix: str, path: Path, map_tenant: bool) -> None:
    target = tenant or _file_tenant(path)
    async with await connect_client(url, target, prefix, timeout_s=60) as client:
        with _shown("importing") as shown:
            result = await client.import_from(path, map_tenant=map_tenant, on_progress=shown)
    err.print(f"imported {path} into tenant {target!r}: {result.entries_written} entries written, "
              f"{result.entries_present} already there; {result.turns_queued} turns queued for working memory, "
              f"{result.turns_present} already there"
              + (f"; left out as forgotten here: {result.entries_forgotten} entries, {result.turns_forgotten} turns"
                 if result.entries_forgotten or result.turns_forgotten else ""))


def import_file(file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="an `engram export` file")],
                tenant: str | None = typer.Option(None, "--tenant", "-t", envvar="ENGRAM_TENANT",
                                                  help="the tenant to import into (default: the file's)"),
                nats: NatsOpt = None,
                map_tenant: bool = typer.Option(False, "--map-tenant",
                                                help="import a file of another tenant into --tenant")) -> None:
    """Load an export file into a tenant: entries keep their ids (embedded again by the receiving engram), working-
    memory turns go to working memory; importing the same file again changes nothing. Operators only."""
    settings = load_settings()
    run(_import(nats_url(settings, nats), tenant, settings.subject_prefix, file, map_tenant))
