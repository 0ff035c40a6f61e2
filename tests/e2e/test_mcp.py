"""`engram mcp` through the MCP SDK's own client (stdio, the command spawned as a subprocess): its tools, remember
then recall, and that one tenant and user fixed at start are all it can reach."""
import asyncio
import socket
import sys
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from engram_client import MemoryClient
from services.stack import Running
from tests.support.ids import unique
from tests.support.memory import store_all
from tests.support.polling import eventually
from tests.support.turns import conversation

TOOLS = {"recall", "remember", "list_entries", "forget"}


def engram_mcp(nats_url: str, tenant: str, user: str) -> StdioServerParameters:
    """`engram mcp` for one tenant and user, as an MCP client spawns it (stdio). The session is opened in the test
    itself: the SDK's task groups must be entered and left in one task, which a fixture's teardown is not."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "services.cli", "mcp", "--tenant", tenant, "--user", user, "--speaker", "Ana",
              "--nats-url", nats_url],
        env={"ENGRAM_LOG_LEVEL": "WARNING", "PATH": "/usr/bin:/bin"})


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


async def test_an_agent_remembers_and_recalls_within_its_tenant_and_user(stack: Running) -> None:
    """The tools are listed without any tenant or user to choose; a remembered turn comes back from recall; the
    same user in another tenant, and another user in this tenant, stay out of reach (recall, list, forget)."""
    tenant, user = unique("mcp"), unique("user")
    async with Client(engram_mcp(stack.nats_url, tenant, user), read_timeout_seconds=60) as session:
        await _remember_recall_and_isolation(session, stack, tenant, user)


async def _remember_recall_and_isolation(session: Client, stack: Running, tenant: str, user: str) -> None:
    tools = (await session.list_tools()).tools
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        properties = set(tool.input_schema.get("properties", {}))
        assert not {p for p in properties if "tenant" in p or "user" in p}, (tool.name, properties)

    other_user, other_tenant = unique("user"), unique("mcp")
    async with await MemoryClient.connect(stack.nats_url, tenant) as neighbour, \
            await MemoryClient.connect(stack.nats_url, other_tenant) as stranger:
        await store_all(neighbour, conversation([("Bo", "My locker code at the gym is 4417.")],
                                                conversation_id=unique("c"), user_id=other_user))
        await store_all(stranger, conversation([("Ana", "My locker code at the gym is 9902.")],
                                               conversation_id=unique("c"), user_id=user))
        [theirs] = [e.id for e in (await neighbour.entries(op="list", user_id=other_user, kind="episodic")).entries]

        remembered = await call(session, "remember", text="My locker code at the gym is 5150, and my dog is Pixel.")
        assert remembered["window_closed"] and remembered["conversation_id"] == f"mcp-{user}"
        listed = await eventually(lambda: call(session, "list_entries"), lambda page: bool(page["entries"]))
        assert all("5150" in e["text"] for e in listed["entries"] if e["kind"] == "episodic")

        found = await call(session, "recall", query="What is my locker code at the gym?", k=10)
        assert "5150" in found["context"]
        seen = found["context"] + " ".join(e["text"] for e in found["entries"])
        assert "4417" not in seen and "9902" not in seen

        assert "not_found: no entries" in await refused(session, "forget", entry_ids=[theirs])
        assert [e.id for e in (await neighbour.entries(op="get", ids=[theirs])).entries] == [theirs]
        assert "invalid_request" in await refused(session, "forget")
        assert "invalid_request" in await refused(session, "forget", entry_ids=["not-a-uuid"])

        receipt = await call(session, "forget", everything=True)
        assert receipt["verified"] and receipt["deleted_entries"] >= 1
        assert (await call(session, "list_entries"))["entries"] == []
        assert (await neighbour.entries(op="list", user_id=other_user)).entries
        assert (await stranger.entries(op="list", user_id=user)).entries


async def test_the_streamable_http_transport_serves_the_same_tools(stack: Running) -> None:
    """`engram mcp --transport http` answers the SDK's client on /mcp: the same tools, a recall for its user."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli", "mcp", "--tenant", unique("mcp"), "--user", unique("user"),
        "--nats-url", stack.nats_url, "--transport", "http", "--port", str(port),
        env={"ENGRAM_LOG_LEVEL": "WARNING", "PATH": "/usr/bin:/bin"}, stderr=asyncio.subprocess.PIPE)
    try:
        await eventually(lambda: listening(port), timeout_s=30)
        async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=60) as session:
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS
            found = await call(session, "recall", query="What is my dog called?")
            assert found["entries"] == []
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.communicate(), timeout=30)


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
