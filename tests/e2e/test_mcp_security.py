"""`engram mcp` is safe to expose: off loopback it needs a bearer token and every request without it gets 401.
Driven with the MCP SDK's own client against the command."""
import asyncio
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from services.stack import Running
from tests.support.ids import unique
from tests.support.mcp import call, free_port, http_server, mcp_command

TOKEN = "t0k3n-" + "x7Qp" * 8  # what a deployment would generate: long and random enough
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "probe", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
async def test_a_non_loopback_bind_without_a_token_is_refused(host: str) -> None:
    """Off loopback and with no token configured, the command exits 2 before listening or connecting anywhere,
    saying how to fix it."""
    argv = mcp_command("nats://127.0.0.1:1", unique("mcp"), unique("user"), "--transport", "http", "--host", host,
                       "--port", str(free_port()))
    code, output = await _exit_of(argv)
    assert code == 2, output
    assert f"refusing to serve MCP over HTTP on --host {host!r} without a token" in output
    assert "--token-file" in output and "ENGRAM_MCP_TOKEN" in output and "127.0.0.1" in output


async def test_a_weak_or_doubly_given_token_is_refused_without_being_shown(tmp_path: Path) -> None:
    """A token too short to guard a port, or one given both in ENGRAM_MCP_TOKEN and --token-file, stops the command;
    the refusal never shows the token."""
    weak = "hunter2hunter"
    argv = mcp_command("nats://127.0.0.1:1", unique("mcp"), unique("user"), "--transport", "http", "--host",
                       "0.0.0.0", "--port", str(free_port()))
    code, output = await _exit_of(argv, {"ENGRAM_MCP_TOKEN": weak})
    assert code == 2 and "ENGRAM_MCP_TOKEN has 13 characters; use at least 16" in output, output
    assert weak not in output

    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    code, output = await _exit_of([*argv, "--token-file", str(token_file)], {"ENGRAM_MCP_TOKEN": TOKEN})
    assert code == 2 and "given twice" in output, output
    assert TOKEN not in output


async def test_with_a_token_only_requests_that_carry_it_are_served(stack: Running, tmp_path: Path) -> None:
    """Listening on every address with --token-file: no Authorization header, another token, or another scheme gets
    401 from /mcp; the SDK's client sending the token lists the tools and recalls. Nothing the server writes, even
    at DEBUG, shows the token."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    port = free_port()
    argv = mcp_command(stack.nats_url, unique("mcp"), unique("user"), "--transport", "http", "--host", "0.0.0.0",
                       "--port", str(port), "--token-file", str(token_file))
    log = tmp_path / "mcp.log"
    async with http_server(argv, port, log, {"ENGRAM_LOG_LEVEL": "DEBUG"}):
        url = f"http://127.0.0.1:{port}/mcp"
        async with httpx2.AsyncClient() as http:
            for authorization in (None, "Bearer wrong-" + TOKEN[6:], f"Bearer {TOKEN}x", f"Basic {TOKEN}",
                                  f"Bearer {TOKEN[:-1]}"):
                headers = MCP_HEADERS | ({"Authorization": authorization} if authorization else {})
                response = await http.post(url, json=INITIALIZE, headers=headers)
                assert response.status_code == 401, (authorization, response.status_code, response.text)
                assert response.headers["www-authenticate"].startswith("Bearer ")
            served = await http.post(url, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": f"Bearer {TOKEN}"})
            assert served.status_code == 200, served.text

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http, \
                Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60) as session:
            assert {t.name for t in (await session.list_tools()).tools} == {"recall", "remember", "list_entries",
                                                                            "forget"}
            assert (await call(session, "recall", query="What is my dog called?"))["entries"] == []
    assert TOKEN not in log.read_text(errors="replace")
    assert "401" in log.read_text(errors="replace")  # the refusals were served (and logged) by this server


async def test_a_token_guards_loopback_too(stack: Running, tmp_path: Path) -> None:
    """ENGRAM_MCP_TOKEN on the default loopback address: requests without it get 401, with it they are served."""
    port = free_port()
    argv = mcp_command(stack.nats_url, unique("mcp"), unique("user"), "--transport", "http", "--port", str(port))
    async with http_server(argv, port, tmp_path / "mcp.log", {"ENGRAM_MCP_TOKEN": TOKEN}), \
            httpx2.AsyncClient() as http:
        url = f"http://127.0.0.1:{port}/mcp"
        assert (await http.post(url, json=INITIALIZE, headers=MCP_HEADERS)).status_code == 401
        authorized = MCP_HEADERS | {"Authorization": f"Bearer {TOKEN}"}
        assert (await http.post(url, json=INITIALIZE, headers=authorized)).status_code == 200


async def _exit_of(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run a command that should stop by itself: its exit code and its output (stdout and stderr, on one line: the
    console wraps it)."""
    proc = await asyncio.create_subprocess_exec(*argv, env={"PATH": "/usr/bin:/bin", **(env or {})},
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    output, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, " ".join(output.decode(errors="replace").split())
