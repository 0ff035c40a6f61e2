"""Export and import in tests: a stack that keeps turns in working memory, a consolidator answering over a store of
the test's own, an export file's lines, and a tenant's stored entries as comparable payloads."""
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from engram_client import MemoryClient
from engram_client.contract import ExportedEntry, ExportedTurn, ExportHeader, ExportLine
from services.consolidator import app as consolidator
from services.consolidator.deps import open_consolidator
from services.stack import Running, running
from shared.messaging import nats_server
from shared.settings import Settings
from shared.store import Scope, Store, all_entries
from tests.support.stacks import fast_settings

NEVER_S = 1e9  # a consolidation interval no test outlives: no scheduled run changes what a test compares


def holding_settings(folder: Path) -> Settings:
    """Fast settings, but a conversation never goes idle (its unflushed turns stay in working memory) and no
    scheduled consolidation runs."""
    return fast_settings(folder).model_copy(update={"idle_timeout_s": 3600.0, "consolidate_interval_s": NEVER_S})


@contextlib.asynccontextmanager
async def holding_stack(folder: Path) -> AsyncIterator[Running]:
    """A stack of holding_settings on a nats-server of its own."""
    server = nats_server.start(folder / "nats")
    try:
        async with running(holding_settings(folder), nats_url=server.url) as state:
            yield state
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def consolidator_over(store: Store, folder: Path) -> AsyncIterator[str]:
    """A consolidator answering requests over `store` on a nats-server of its own (its handlers only: no schedule,
    so the store changes only by what the test asks); yields the server's URL."""
    server = nats_server.start(folder / "nats")
    try:
        settings = holding_settings(folder)
        async with open_consolidator(settings, server.url, store=store) as deps:
            service = consolidator.build(settings, deps)
            await deps.broker.start()
            try:
                yield server.url
            finally:
                await service.stop()
    finally:
        server.stop()


async def engram_cli(*args: str, timeout_s: float = 300.0) -> tuple[int, str]:
    """Run the `engram` command in a process of its own; its exit code and its output (stdout and stderr)."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "services.cli", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                                                env={"ENGRAM_LOG_LEVEL": "WARNING", "COLUMNS": "200",
                                                     "PATH": "/usr/bin:/bin"})
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=timeout_s)
    return proc.returncode or 0, out.decode()


def lines_of(path: Path) -> tuple[ExportHeader, list[ExportedEntry], list[ExportedTurn]]:
    """An export file's header, entries and turns."""
    parsed = [ExportLine.model_validate_json(line).root for line in path.read_text(encoding="utf-8").splitlines()]
    header = parsed[0]
    assert isinstance(header, ExportHeader)
    return (header, [e for e in parsed if isinstance(e, ExportedEntry)],
            [t for t in parsed if isinstance(t, ExportedTurn)])


async def export_file(client: MemoryClient, path: Path, user_id: str | None = None) -> Path:
    """Export the client's tenant (or one user) into `path`."""
    with path.open("w", encoding="utf-8") as out:
        await client.export_to(out, user_id=user_id)
    return path


async def payloads(store: Store, tenant: str) -> dict[str, dict[str, Any]]:
    """Every stored entry of a tenant, by id, as its whole payload (every field, as stored), without the tenant."""
    return {e.id: json.loads(e.model_dump_json(exclude={"tenant_id"})) for e in await all_entries(
        store, Scope(tenant_id=tenant))}
