"""`engram mcp` through the MCP SDK's own client (stdio, the command spawned as a subprocess): its tools, remember
then recall, and that one tenant and user fixed at start are all it can reach."""
from pathlib import Path

from mcp import Client

from engram_client import MemoryClient
from services.stack import Running
from tests.support.ids import unique
from tests.support.mcp import call, engram_mcp, free_port, http_server, mcp_command, refused
from tests.support.memory import store_all
from tests.support.polling import eventually
from tests.support.turns import conversation

TOOLS = {"recall", "remember", "list_entries", "forget"}


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

        preview = await call(session, "forget", everything=True)
        assert not preview["erased"] and (await call(session, "list_entries"))["entries"]
        receipt = await call(session, "forget", everything=True, confirm=preview["confirm"])
        assert receipt["erased"] and receipt["verified"] and receipt["deleted_entries"] >= 1
        assert (await call(session, "list_entries"))["entries"] == []
        assert (await neighbour.entries(op="list", user_id=other_user)).entries
        assert (await stranger.entries(op="list", user_id=user)).entries


async def test_the_streamable_http_transport_serves_the_same_tools(stack: Running, tmp_path: Path) -> None:
    """`engram mcp --transport http` answers the SDK's client on /mcp: the same tools, a recall for its user."""
    port = free_port()
    argv = mcp_command(stack.nats_url, unique("mcp"), unique("user"), "--transport", "http", "--port", str(port))
    async with http_server(argv, port, tmp_path / "mcp.log"), \
            Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=60) as session:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        found = await call(session, "recall", query="What is my dog called?")
        assert found["entries"] == []
