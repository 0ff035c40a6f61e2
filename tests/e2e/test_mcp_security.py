"""`engram mcp` is safe to expose: off loopback it needs a bearer token and every request without it gets 401; its
tools say which only read and which destroys; `forget` erases nothing it has not shown first, and only once the user
(elicitation) or the preview's own token confirms it. Driven with the MCP SDK's own client against the command."""
import asyncio
from pathlib import Path
from typing import Any, Literal

import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from engram_client import MemoryClient
from engram_client.contract import Turn
from services.stack import Running
from tests.support.ids import unique
from tests.support.mcp import call, engram_mcp, free_port, http_server, mcp_command, refused
from tests.support.memory import store_all
from tests.support.turns import conversation

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


async def test_the_tools_say_which_only_read_and_which_destroys(stack: Running) -> None:
    """forget is destructive (and not read-only; asked again with the same arguments it has no further effect);
    recall and list_entries only read; remember adds without destroying."""
    async with Client(engram_mcp(stack.nats_url, unique("mcp"), unique("user")), read_timeout_seconds=60) as session:
        hints = {t.name: t.annotations for t in (await session.list_tools()).tools}
    forget = hints["forget"]
    assert forget is not None
    assert (forget.destructive_hint, forget.read_only_hint, forget.idempotent_hint) == (True, False, True)
    for name in ("recall", "list_entries"):
        annotations = hints[name]
        assert annotations is not None and annotations.read_only_hint is True, name
    remember = hints["remember"]
    assert remember is not None and (remember.read_only_hint, remember.destructive_hint) == (False, False)


async def test_forget_erases_only_what_a_confirmed_preview_named(stack: Running) -> None:
    """A client that cannot ask its user: forget without confirm erases nothing and names what would go (ids and
    short texts, or everything of the user) with a token; the token of another request, a used one and a made-up
    one are refused and erase nothing; the preview's own token erases exactly what it named."""
    tenant, user = unique("mcp"), unique("user")
    async with await MemoryClient.connect(stack.nats_url, tenant) as memory, \
            Client(engram_mcp(stack.nats_url, tenant, user), read_timeout_seconds=60) as session:
        locker, dog = await _two_entries(memory, user)

        preview = await call(session, "forget", entry_ids=[locker.id])
        assert not preview["erased"] and preview["deleted_entries"] == 0
        assert [(e["id"], e["kind"]) for e in preview["entries"]] == [(locker.id, "episodic")]
        assert "4417" in preview["entries"][0]["text"] and locker.id in preview["preview"]
        assert preview["confirm"] and preview["confirm"] in preview["note"]
        assert await _ids(memory, user) == {locker.id, dog.id}
        assert "4417" in (await call(session, "recall", query="What is my locker code?"))["context"]

        mismatch = await refused(session, "forget", entry_ids=[dog.id], confirm=preview["confirm"])
        assert f"issued for the entries {locker.id}, not for the entries {dog.id}" in mismatch
        assert "already used" in await refused(session, "forget", entry_ids=[locker.id], confirm=preview["confirm"])
        assert "unknown" in await refused(session, "forget", entry_ids=[locker.id], confirm="made-up")
        assert await _ids(memory, user) == {locker.id, dog.id}

        preview = await call(session, "forget", entry_ids=[locker.id])
        assert "issued for the entries" in await refused(session, "forget", everything=True,
                                                         confirm=preview["confirm"])
        preview = await call(session, "forget", entry_ids=[locker.id])
        erased = await call(session, "forget", entry_ids=[locker.id], confirm=preview["confirm"])
        assert erased["erased"] and erased["deleted_entries"] == 1 and erased["verified"]
        assert await _ids(memory, user) == {dog.id}
        assert "4417" not in (await call(session, "recall", query="What is my locker code?"))["context"]

        everything = await call(session, "forget", everything=True)
        assert not everything["erased"] and everything["entries"] == []
        assert f"everything engram holds about user {user!r}" in everything["preview"]
        assert "issued for everything" in await refused(session, "forget", entry_ids=[dog.id],
                                                        confirm=everything["confirm"])
        assert await _ids(memory, user) == {dog.id}
        everything = await call(session, "forget", everything=True)
        erased = await call(session, "forget", everything=True, confirm=everything["confirm"])
        assert erased["erased"] and erased["verified"] and erased["deleted_entries"] >= 1
        assert await _ids(memory, user) == set()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_forget_asks_the_user_when_the_client_can(stack: Running, mode: Literal["auto", "legacy"]) -> None:
    """A client that declares elicitation is asked with the preview, no token is issued to it, and only the user's
    "erase" erases: a decline and an answer not to erase leave the entry. On the current protocol (the question
    rides an input-required result) and on the handshake-era one (a request to the client mid-call)."""
    tenant, user = unique("mcp"), unique("user")
    questions: list[str] = []
    answers: list[mcp_types.ElicitResult] = []

    async def ask_user(context: ClientRequestContext, params: Any) -> mcp_types.ElicitResult:
        questions.append(params.message)
        return answers.pop(0)

    async with await MemoryClient.connect(stack.nats_url, tenant) as memory, \
            Client(engram_mcp(stack.nats_url, tenant, user), read_timeout_seconds=60, mode=mode,
                   elicitation_callback=ask_user) as session:
        locker, dog = await _two_entries(memory, user)

        answers.append(mcp_types.ElicitResult(action="decline"))
        declined = await call(session, "forget", entry_ids=[locker.id])
        assert not declined["erased"] and declined["confirm"] is None and "declined" in declined["note"]
        assert locker.id in questions[-1] and "4417" in questions[-1]
        answers.append(mcp_types.ElicitResult(action="accept", content={"erase": False}))
        kept = await call(session, "forget", entry_ids=[locker.id])
        assert not kept["erased"] and kept["confirm"] is None
        assert await _ids(memory, user) == {locker.id, dog.id}

        answers.append(mcp_types.ElicitResult(action="accept", content={"erase": True}))
        erased = await call(session, "forget", entry_ids=[locker.id])
        assert erased["erased"] and erased["deleted_entries"] == 1
        assert await _ids(memory, user) == {dog.id} and len(questions) == 3


async def _exit_of(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run a command that should stop by itself: its exit code and its output (stdout and stderr, on one line: the
    console wraps it)."""
    proc = await asyncio.create_subprocess_exec(*argv, env={"PATH": "/usr/bin:/bin", **(env or {})},
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    output, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, " ".join(output.decode(errors="replace").split())


async def _two_entries(memory: MemoryClient, user: str) -> tuple[Any, Any]:
    """Two episodes of the user, in two conversations: the locker code's and the dog's."""
    for text in ("My locker code at the gym is 4417.", "My dog is called Pixel."):
        turns: list[Turn] = conversation([("Ana", text)], conversation_id=unique("c"), user_id=user)
        await store_all(memory, turns)
    episodes = (await memory.entries(op="list", user_id=user, kind="episodic")).entries
    by_text = {("locker" if "4417" in e.text else "dog"): e for e in episodes}
    assert set(by_text) == {"locker", "dog"}, [e.text for e in episodes]
    return by_text["locker"], by_text["dog"]


async def _ids(memory: MemoryClient, user: str) -> set[str]:
    """The ids of the user's episodes now."""
    return {e.id for e in (await memory.entries(op="list", user_id=user, kind="episodic")).entries}
