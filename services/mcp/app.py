"""The MCP server's tools: recall, remember a turn, list entries, forget, all through engram_client over NATS.

The tenant and the user are fixed when the server starts (the client is the tenant's, the user an argument of
`build_app`); no tool takes either, so a model can neither choose nor widen them. Forgetting entries by id checks
first that each one is the user's: the contract's forget by ids is scoped to the tenant, not to a user.
"""
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import wraps
from typing import Annotated, Any, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from engram_client import MemoryClient
from engram_client.contract import MAX_K, EntryKind, Role, Turn
from engram_client.errors import EngramError, NotFound
from services.mcp.auth import StaticTokenVerifier, auth_settings

P = ParamSpec("P")
T = TypeVar("T")

INSTRUCTIONS = ("Long-term memory of one user's conversations. `remember` stores a turn (what the user or you said);"
                " `recall` finds what matters to a question and returns a context to answer from; `list_entries` "
                "shows what is stored; `forget` erases entries, or everything about the user.")


class Memory(BaseModel):
    """One memory entry as a tool returns it."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: EntryKind
    text: str
    occurred_at: datetime
    conversation_id: str


class Recalled(BaseModel):
    """What `recall` returns: the context to answer from, and the entries it was rendered from."""

    context: str
    entries: list[Memory]


class Remembered(BaseModel):
    """What `remember` returns: where the turn went."""

    conversation_id: str
    turn_id: str
    window_closed: bool


class Listed(BaseModel):
    """A page of the user's stored entries; `next_cursor` asks for the next one."""

    entries: list[Memory]
    next_cursor: str | None = None


class Forgotten(BaseModel):
    """The receipt of `forget`: how many entries were deleted, and whether a check afterwards found none left."""

    deleted_entries: int
    verified: bool


def _tool_errors(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """engram's refusals reach the model as tool errors it can read, starting with their wire code."""
    @wraps(fn)
    async def wrapped(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except EngramError as exc:
            message = str(exc) if str(exc).startswith(f"{exc.code}:") else f"{exc.code}: {exc}"
            raise ToolError(message) from exc
        except ValidationError as exc:  # a request built from the tool's arguments that the contract refuses
            raise ToolError(f"invalid_request: {exc}") from exc
    return wrapped


def build_app(client: MemoryClient, user_id: str, conversation_id: str, *, speaker: str | None = None,
              assistant: str = "assistant", name: str = "engram", token: SecretStr | None = None) -> MCPServer[Any]:
    """An MCP server whose tools act for `user_id` in the client's tenant.

    Args:
        conversation_id: the conversation `remember` adds turns to (fixed too: a model naming one could write into
            another user's conversation).
        speaker: the user's name in remembered turns (the user id by default).
        token: the bearer token every HTTP request must carry (the SDK answers 401 without it); None: no check.
    """
    server: MCPServer[Any] = MCPServer(
        name, instructions=INSTRUCTIONS, token_verifier=StaticTokenVerifier(token) if token else None,
        auth=auth_settings() if token else None)

    def memory(entry: Any) -> Memory:
        return Memory(id=entry.id, kind=entry.kind, text=entry.text, occurred_at=entry.occurred_at,
                      conversation_id=entry.conversation_id)

    @server.tool()
    @_tool_errors
    async def recall(query: Annotated[str, Field(description="the question or topic, in the user's words")],
                     k: Annotated[int, Field(ge=1, le=MAX_K, description="how many entries at most")] = 8,
                     token_budget: Annotated[int, Field(ge=1, le=32_000,
                                                        description="size of the context in tokens")] = 1500,
                     ) -> Recalled:
        """Find the user's memories that matter to a question; answer from `context` (entries are dated)."""
        found = await client.recall(query, user_id=user_id, k=k, token_budget=token_budget)
        return Recalled(context=found.context, entries=[memory(e) for e in found.entries])

    @server.tool()
    @_tool_errors
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

    @server.tool()
    @_tool_errors
    async def list_entries(kind: Annotated[EntryKind | None, Field(description="only this kind")] = None,
                           limit: Annotated[int, Field(ge=1, le=500)] = 20,
                           cursor: Annotated[str | None, Field(description="next_cursor of the page before")] = None,
                           ) -> Listed:
        """List what is stored about the user, newest pages first as engram keeps them."""
        page = await client.entries(op="list", user_id=user_id, kind=kind, limit=limit, cursor=cursor)
        return Listed(entries=[memory(e) for e in page.entries], next_cursor=page.next_cursor)

    @server.tool()
    @_tool_errors
    async def forget(entry_ids: Annotated[list[str] | None, Field(description="ids of entries to erase")] = None,
                     everything: Annotated[bool, Field(description="erase everything stored about the user")] = False,
                     ) -> Forgotten:
        """Erase some entries of the user, or (everything=true) all the user's memory, everywhere engram keeps it."""
        if everything == bool(entry_ids):
            raise ToolError("invalid_request: give entry_ids, or everything=true, not both or neither")
        if everything:
            receipt = await client.forget(user_id=user_id)
        else:
            assert entry_ids is not None
            page = await client.entries(op="get", ids=entry_ids)
            owned = {e.id for e in page.entries if e.user_id == user_id}
            missing = [i for i in entry_ids if str(_canonical(i)) not in owned]
            if missing:
                raise NotFound(f"no entries {missing} of this user")
            receipt = await client.forget(entry_ids=sorted(owned))
        return Forgotten(deleted_entries=receipt.deleted.entries, verified=receipt.verified)

    return server


def _canonical(entry_id: str) -> str:
    """An entry id as engram spells it (ids are UUIDs; another spelling of the same one is the same entry)."""
    try:
        return str(uuid.UUID(entry_id))
    except ValueError:
        return entry_id
