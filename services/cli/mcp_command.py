"""`engram mcp`: serve engram's memory to an agent over the Model Context Protocol (stdio or streamable HTTP).

Over HTTP it listens on loopback unless a bearer token is configured (ENGRAM_MCP_TOKEN or --token-file): on any
other address it refuses to start without one, and with one every request without it is answered 401.
"""
from pathlib import Path
from typing import Annotated, Literal

import typer
from pydantic import SecretStr, TypeAdapter

from engram_client.contract.base import Id
from services.cli.base import NatsOpt, TenantOpt, connect_client, err, load_settings, nats_url, run
from services.mcp.app import build_app
from services.mcp.auth import http_token
from shared.errors import ConfigError

Transport = Literal["stdio", "http"]


async def serve_mcp(url: str, tenant: str, prefix: str, user: str, conversation: str, speaker: str | None,
                    transport: Transport, host: str, port: int, token: SecretStr | None = None) -> None:
    """Connect to engram as the tenant, then serve the user's tools until the MCP client goes (stdio) or a signal
    stops the HTTP server (which asks every request for the bearer `token` when one is given)."""
    user, conversation = TypeAdapter(Id).validate_python(user), TypeAdapter(Id).validate_python(conversation)
    async with await connect_client(url, tenant, prefix, timeout_s=30.0) as client:
        app = build_app(client, user, conversation, speaker=speaker, token=token)
        if transport == "stdio":
            await app.run_stdio_async()
        else:
            await app.run_streamable_http_async(host=host, port=port)


def mcp(user: Annotated[str, typer.Option("--user", "-u", help="the user whose memory the tools reach (fixed)")],
        tenant: TenantOpt = "default", nats: NatsOpt = None,
        conversation: Annotated[str | None, typer.Option(
            "--conversation", help="the conversation `remember` adds turns to (default: mcp-<user>)")] = None,
        speaker: Annotated[str | None, typer.Option("--speaker", help="the user's name in remembered turns")] = None,
        transport: Annotated[str, typer.Option("--transport", help="stdio, or http (streamable HTTP)")] = "stdio",
        host: Annotated[str, typer.Option("--host", help="HTTP: address to listen on (not loopback: a token is "
                                                         "required)")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="HTTP: port (the endpoint is /mcp)")] = 8765,
        token_file: Annotated[Path | None, typer.Option(
            "--token-file", help="HTTP: a file holding the bearer token every request must carry (or "
                                 "ENGRAM_MCP_TOKEN)")] = None) -> None:
    """Serve recall, remember, list_entries and forget to an agent over MCP, for one tenant and one user fixed here
    (the model never chooses them). stdio by default; --transport http serves streamable HTTP on /mcp, behind a
    bearer token when one is configured (required off loopback). forget shows what it would erase and erases only
    once that is confirmed."""
    settings = load_settings()
    if transport not in ("stdio", "http"):
        raise typer.BadParameter(f"--transport {transport!r}: use stdio or http")
    if transport == "stdio" and token_file is not None:
        raise typer.BadParameter("--token-file guards the HTTP transport; stdio has no network to guard")
    try:
        token = http_token(settings.mcp_token, token_file, host, user) if transport == "http" else None
    except ConfigError as exc:
        err.print(f"[red]configuration error:[/red] {exc}")
        raise typer.Exit(2) from exc
    run(serve_mcp(nats_url(settings, nats), tenant, settings.subject_prefix, user, conversation or f"mcp-{user}",
                  speaker, "stdio" if transport == "stdio" else "http", host, port, token))
