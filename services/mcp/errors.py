"""engram's refusals as MCP tool errors: the model reads them, starting with their wire code."""
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from engram_client.errors import EngramError

P = ParamSpec("P")
T = TypeVar("T")


def tool_errors(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Wrap a tool (or a resolver of its arguments) so that engram's refusals reach the model as tool errors."""
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
