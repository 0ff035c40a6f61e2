"""`engram mcp` as an MCP client reaches it: the command over stdio or on an HTTP port, and tool calls' results."""
import asyncio
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.support.polling import eventually

BASE_ENV = {"ENGRAM_LOG_LEVEL": "WARNING", "PATH": "/usr/bin:/bin"}


def mcp_command(nats_url: str, tenant: str, user: str, *options: str) -> list[str]:
    """The argv of `engram mcp` for one tenant and user (the user's name in turns is Ana)."""
    return [sys.executable, "-m", "services.cli", "mcp", "--tenant", tenant, "--user", user, "--speaker", "Ana",
            "--nats-url", nats_url, *options]


def engram_mcp(nats_url: str, tenant: str, user: str) -> StdioServerParameters:
    """`engram mcp` for one tenant and user, as an MCP client spawns it (stdio). The session is opened in the test
    itself: the SDK's task groups must be entered and left in one task, which a fixture's teardown is not."""
    command, *args = mcp_command(nats_url, tenant, user)
    return StdioServerParameters(command=command, args=args, env=dict(BASE_ENV))


@asynccontextmanager
async def http_server(argv: list[str], port: int, log: Path, env: dict[str, str] | None = None,
                      ) -> AsyncIterator[asyncio.subprocess.Process]:
    """`engram mcp --transport http` started with `argv`, once it accepts connections on `port`, its stdout and
    stderr written to `log`; terminated on the way out."""
    with log.open("wb") as output:
        proc = await asyncio.create_subprocess_exec(*argv, env={**BASE_ENV, **(env or {})}, stdout=output,
                                                    stderr=asyncio.subprocess.STDOUT)
    try:
        await eventually(lambda: listening(port), lambda up: up or proc.returncode is not None, timeout_s=30)
        assert proc.returncode is None, log.read_text()
        yield proc
    finally:
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.wait(), timeout=30)


async def call(session: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's structured result (the call must succeed)."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    content: dict[str, Any] = result.structured_content
    return content


async def refused(session: Client, tool: str, **arguments: Any) -> str:
    """The text of a tool's error (the call must fail)."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return " ".join(getattr(block, "text", "") for block in result.content)


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def listening(port: int) -> bool:
    """Whether something accepts TCP connections on the port."""
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True
