"""What every `engram` command shares: its options, reading settings, logging, and turning errors into exits."""
import asyncio
import signal
from collections.abc import Coroutine
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from engram_client.client import MemoryClient
from engram_client.contract.failures import error_body
from engram_client.errors import EngramError
from shared.messaging.security import nats_security
from shared.runtime import logs
from shared.settings import Settings

console = Console()
err = Console(stderr=True)

TenantOpt = Annotated[str, typer.Option("--tenant", "-t", help="tenant id", envvar="ENGRAM_TENANT")]
NatsOpt = Annotated[str | None, typer.Option("--nats-url", help="NATS URL (default: ENGRAM_NATS_URL or the "
                                                                "embedded server's address)")]


def load_settings() -> Settings:
    """Settings from the environment (exit 2 with the fix-it message if invalid), and logging set up by them."""
    try:
        settings = Settings()
    except Exception as exc:  # pydantic's message already says which variable and how to fix it
        err.print(f"[red]configuration error:[/red] {exc}")
        raise typer.Exit(2) from exc
    logs.configure(settings.log_level)
    return settings


def nats_url(settings: Settings, given: str | None) -> str:
    """The URL a client command talks to: --nats-url, ENGRAM_NATS_URL, or the embedded server's default."""
    return given or settings.nats_url or f"nats://127.0.0.1:{settings.nats_port or 4222}"


# A command stopped by SIGTERM exits as the shell reports a process the signal killed.
TERMINATED = 128 + signal.SIGTERM


class Terminated(Exception):
    """SIGTERM stopped the command, after what it had started was stopped (see embedded.py)."""


def run(coro: Coroutine[Any, Any, int | None] | Coroutine[Any, Any, None]) -> None:
    """Run a command's coroutine; an EngramError exits 1 with its message, a returned code exits with it, a
    command SIGTERM stopped cleanly (`Terminated`) with 143."""
    try:
        code = asyncio.run(coro)
    except Terminated as exc:
        err.print(f"[yellow]{exc}[/yellow]")
        raise typer.Exit(TERMINATED) from exc
    except EngramError as exc:
        err.print(f"[red]{type(exc).__name__}:[/red] {exc}")
        raise typer.Exit(1) from exc
    except ValidationError as exc:  # a request the command built from its options is not a valid one
        err.print(f"[red]{error_body(exc).message}[/red]")
        raise typer.Exit(2) from exc
    if code:
        raise typer.Exit(code)


async def connect_client(url: str, tenant: str, prefix: str, timeout_s: float = 10.0, **options: Any) -> MemoryClient:
    """The SDK's client for a command, with the identity, TLS and inbox prefix the ENGRAM_NATS_* settings name."""
    return await MemoryClient.connect(url, tenant, prefix, timeout_s=timeout_s,
                                      security=nats_security(Settings()), **options)
