"""`forget`'s confirmation: what a request would erase (its preview), and the tokens that confirm exactly it.

A first call of `forget` erases nothing: it answers with a preview naming what would go and a `confirm` token. The
token confirms that one request (the same entry ids, or everything of the user), once, for `CONFIRM_TTL_S`; any
other use of it is refused, and a refused or expired token is gone, so erasing takes two calls, the second
repeating the first. Tokens live in this process only (an `engram mcp` restart forgets them: preview again).
"""
import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from mcp.server.mcpserver.exceptions import ToolError

CONFIRM_TTL_S = 300.0
MAX_PENDING = 256  # previews not yet confirmed; past it the oldest token lapses


@dataclass(frozen=True)
class Target:
    """One forget request in canonical form: everything of the user, or these entry ids (sorted, distinct)."""

    everything: bool
    entry_ids: tuple[str, ...] = ()

    def describe(self, user_id: str) -> str:
        """The request in words, as a refusal names it."""
        if self.everything:
            return f"everything engram holds about user {user_id!r}"
        return f"the entries {', '.join(self.entry_ids)}"


@dataclass(frozen=True)
class Issued:
    """A confirm token and when it lapses."""

    token: str
    expires_at: datetime


@dataclass(frozen=True)
class _Pending:
    target: Target
    deadline: float  # on the monotonic clock


class Confirmations:
    """The confirm tokens previews have issued and nobody has used yet."""

    def __init__(self, ttl_s: float = CONFIRM_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl_s = ttl_s
        self._clock = clock
        # Keyed by the token's digest: the tokens themselves are kept nowhere, and a lookup compares digests.
        self._pending: dict[bytes, _Pending] = {}

    def issue(self, target: Target) -> Issued:
        """A new token that confirms `target` once, within the TTL."""
        now = self._clock()
        self._pending = {k: p for k, p in self._pending.items() if p.deadline > now}
        while len(self._pending) >= MAX_PENDING:
            del self._pending[next(iter(self._pending))]
        token = secrets.token_urlsafe(16)
        self._pending[_digest(token)] = _Pending(target, now + self._ttl_s)
        return Issued(token, datetime.now(UTC) + timedelta(seconds=self._ttl_s))

    def redeem(self, token: str, target: Target, user_id: str) -> None:
        """Use the token for `target`: it goes either way, and a token for another request, an expired or unknown
        one is refused with what to do instead."""
        pending = self._pending.pop(_digest(token), None)
        again = "call forget with the same arguments and no confirm for a new preview"
        if pending is None:
            raise ToolError(f"invalid_request: unknown or already used confirm token; {again}")
        if pending.deadline <= self._clock():
            raise ToolError(f"invalid_request: the confirm token expired ({self._ttl_s:.0f} s after its preview); "
                            f"{again}")
        if pending.target != target:
            raise ToolError(f"invalid_request: the confirm token was issued for "
                            f"{pending.target.describe(user_id)}, not for {target.describe(user_id)}; nothing "
                            f"was erased; {again}")

    def __len__(self) -> int:
        return len(self._pending)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
