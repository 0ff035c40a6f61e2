"""The MCP server's tools: recall, remember a turn, list entries, forget, all through engram_client over NATS.

The tenant and the user are fixed when the server starts (the client is the tenant's, the user an argument of
`build_app`); no tool takes either, so a model can neither choose nor widen them. Forgetting entries by id checks
first that each one is the user's: the contract's forget by ids is scoped to the tenant, not to a user. `forget`
erases only what a preview showed and the user (or a confirm token) confirmed (services/mcp/forget.py); the tools
carry MCP annotations saying which only read and which destroys.
"""
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from engram_client import MemoryClient
from engram_client.contract import MAX_K, EntryKind, EntryView, RecalledEntry, Role, Turn
from services.mcp import forget
from services.mcp.auth import StaticTokenVerifier, auth_settings
from services.mcp.confirm import Confirmations
from services.mcp.errors import tool_errors

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)

INSTRUCTIONS = ("Long-term memory of one user's conversations. `remember` stores a turn (what the user or you said);"
                " `recall` finds what matters to a question and returns a context to answer from; `list_entries` "
                "shows what is stored; `forget` erases entries, or everything about the user, once the user "
                "confirmed the preview it shows first.")


class Memory(BaseModel):
    """One memory entry as a tool returns it."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: EntryKind
    text: str
    occurred_at: datetime
    conversation_id: str
    excerpt: bool = False  # recall cut it to the turns of the person asked about; list_entries shows it whole


class Recalled(BaseModel):
    """What `recall` returns: the context to answer from, and the entries it was rendered from."""

    context: str
    entries: list[Memory]
    left_out: int = 0  # relevant memories the token budget left out (a larger budget would add them)


class Remembered(BaseModel):
    """What `remember` returns: where the turn went."""

    conversation_id: str
    turn_id: str
    window_closed: bool


class Listed(BaseModel):
    """A page of the user's stored entries; `next_cursor` asks for the next one."""

    entries: list[Memory]
    next_cursor: str | None = None


def build_app(client: MemoryClient, user_id: str, conversation_id: str, *, speaker: str | None = None,
              assistant: str = "assistant", name: str = "engram", token: SecretStr | None = None,
              confirmations: Confirmations | None = None) -> MCPServer[Any]:
    """An MCP server whose tools act for `user_id` in the client's tenant.

    Args:
        conversation_id: the conversation `remember` adds turns to (fixed too: a model naming one could write into
            another user's conversation).
        speaker: the user's name in remembered turns (the user id by default).
        token: the bearer token every HTTP request must carry (the SDK answers 401 without it); None: no check.
        confirmations: where `forget` keeps its previews' tokens (a fresh store by default).
    """
    server: MCPServer[Any] = MCPServer(
        name, instructions=INSTRUCTIONS, token_verifier=StaticTokenVerifier(token) if token else None,
        auth=auth_settings() if token else None)

    def memory(entry: RecalledEntry | EntryView) -> Memory:
        return Memory(id=entry.id, kind=entry.kind, text=entry.text, occurred_at=entry.occurred_at,
                      conversation_id=entry.conversation_id,
                      excerpt=isinstance(entry, RecalledEntry) and entry.excerpt)

    @server.tool(annotations=READ_ONLY)
    @tool_errors
    async def recall(query: Annotated[str, Field(description="the question or topic, in the user's words")],
                     k: Annotated[int | None, Field(ge=1, le=MAX_K, description="how many entries at most; "
                                                    "leave it out to get the best that fit the budget")] = None,
                     token_budget: Annotated[int, Field(ge=1, le=32_000,
                                                        description="size of the context in tokens")] = 1500,
                     ) -> Recalled:
        """Find the user's memories that matter to a question, the best that fit `token_budget`; answer from
        `context` (entries are dated; a question about the order of events gets them oldest first, as a timeline).
        `left_out` says how many relevant memories did not fit."""
        found = await client.recall(query, user_id=user_id, k=k, token_budget=token_budget)
        return Recalled(context=found.context, entries=[memory(e) for e in found.entries], left_out=found.left_out)

    @server.tool(annotations=ADDITIVE)
    @tool_errors
    async def remember(text: Annotated[str, Field(description="what was said, as said")],
                       role: Annotated[Role, Field(description="who said it: the user, or you (assistant)")] = "user",
                       close_window: Annotated[bool, Field(description="store it now (true), or let it gather with "
                                                                       "the next turns (false)")] = True,
                       ) -> Remembered:
        """Store one turn of this session's conversation in the user's long-term memory."""
        turn = Turn(conversation_id=conversation_id, turn_id=uuid.uuid4().hex, role=role, text=text,
                    speaker=(speaker or user_id) if role == "user" else assistant, ts=datetime.now(UTC),
                    user_id=user_id)
        await client.publish_turn(turn)
        if close_window:
            await client.flush(conversation_id)
        return Remembered(conversation_id=conversation_id, turn_id=turn.turn_id, window_closed=close_window)

    @server.tool(annotations=READ_ONLY)
    @tool_errors
    async def list_entries(kind: Annotated[EntryKind | None, Field(description="only this kind")] = None,
                           limit: Annotated[int, Field(ge=1, le=500)] = 20,
                           cursor: Annotated[str | None, Field(description="next_cursor of the page before")] = None,
                           ) -> Listed:
        """List what is stored about the user, newest pages first as engram keeps them."""
        page = await client.entries(op="list", user_id=user_id, kind=kind, limit=limit, cursor=cursor)
        return Listed(entries=[memory(e) for e in page.entries], next_cursor=page.next_cursor)

    forget.register(server, client, user_id, confirmations or Confirmations())
    return server

