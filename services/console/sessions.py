"""Signed-in sessions, held by the console: the cookie carries a random id only. Each session keeps its CSRF token
and its NATS connection (a tenant's own; the operator's sessions share the console's), and ends when signed out,
after IDLE_S without a request, or after MAX_AGE_S."""
import asyncio
import contextlib
import logging
import secrets
import time
from dataclasses import dataclass, field

from nats.aio.client import Client

from engram_client import MemoryClient, connection
from services.console.signin import Access, SignIn

log = logging.getLogger("engram.console")

IDLE_S = 30 * 60
MAX_AGE_S = 12 * 3600
MAX_SESSIONS = 256  # each tenant session holds a NATS connection
PER_IDENTITY = 8     # sessions one identity (the operator, or one tenant) keeps; its oldest goes first


@dataclass(repr=False)
class Session:
    """One signed-in browser."""

    id: str
    access: Access
    nc: Client
    owns_connection: bool  # a tenant's own connection, closed with the session
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    started: float = field(default_factory=time.monotonic)
    seen: float = field(default_factory=time.monotonic)
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # set when the session ends (its streams stop)
    streams: int = 0  # live panels open

    def client(self, tenant: str, prefix: str) -> MemoryClient:
        """The contract's client for `tenant` over this session's connection."""
        return MemoryClient(self.nc, tenant, prefix, timeout_s=30.0)

    def expired(self, now: float) -> bool:
        """Idle too long, or signed in too long ago."""
        return now - self.seen > IDLE_S or now - self.started > MAX_AGE_S


class Sessions:
    """The console's sessions, by id."""

    def __init__(self, operator_nc: Client, signin: SignIn | None = None) -> None:
        """
        Args:
            signin: checks that a tenant's session still holds (its key not rotated or removed) when the registry
                changes; None: sessions hold until they end.
        """
        self._operator_nc = operator_nc
        self._signin = signin
        self._sessions: dict[str, Session] = {}
        self._revoked: list[Session] = []

    async def start(self, access: Access, nats_url: str) -> Session:
        """A new session for `access`: a tenant's connects to NATS with its own identity (failing with
        engram_client's Unavailable when NATS refuses it).

        Raises:
            engram_client.errors.Unavailable: the tenant's connection failed.
        """
        await self.expire()
        if access.security is not None:
            nc = await connection.connect(nats_url, f"engram-console-{access.tenant}", quiet=True,
                                          first_connect_timeout_s=5.0, security=access.security)
            owns = True
        else:
            nc, owns = self._operator_nc, False
        # Room, once the connection is made: the identity's own oldest session goes first; past the whole cap, the
        # least recently used tenant session (an operator's only when no tenant's is left).
        own = sorted((s for s in self._sessions.values() if s.access.tenant == access.tenant), key=lambda s: s.seen)
        for old in own[:max(0, len(own) - PER_IDENTITY + 1)]:
            await self.end(old.id)
        while len(self._sessions) >= MAX_SESSIONS:
            await self.end(min(self._sessions.values(), key=lambda s: (s.access.operator, s.seen)).id)
        session = Session(id=secrets.token_urlsafe(32), access=access, nc=nc, owns_connection=owns)
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session with this id (its idle clock restarted), or None."""
        session = self._sessions.get(session_id or "")
        now = time.monotonic()
        if session is None or session.expired(now):
            return None
        if self._signin is not None and not self._signin.still_valid(session.access):
            self._sessions.pop(session.id, None)  # its key was rotated or removed; the sweep closes what is left
            session.ended.set()
            self._revoked.append(session)
            return None
        session.seen = now
        return session

    def alive(self, session: Session) -> bool:
        """Whether `session` is still signed in (not ended, not expired); its idle clock is left alone."""
        return self._sessions.get(session.id) is session and not session.expired(time.monotonic())

    async def end(self, session_id: str) -> None:
        """Sign the session out, stopping its event streams and closing its own connection."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        session.ended.set()
        if session.owns_connection:
            await connection.close(session.nc)

    async def expire(self) -> None:
        """End every expired session, and close the connections of revoked ones."""
        while self._revoked:
            revoked = self._revoked.pop()
            if revoked.owns_connection:
                await connection.close(revoked.nc)
        now = time.monotonic()
        for session_id in [s.id for s in self._sessions.values() if s.expired(now)]:
            await self.end(session_id)

    async def close(self) -> None:
        """End every session."""
        for session_id in list(self._sessions):
            with contextlib.suppress(Exception):
                await self.end(session_id)

    async def sweep_forever(self, every_s: float = 60.0) -> None:
        """End expired sessions every `every_s` (until cancelled)."""
        while True:
            await asyncio.sleep(every_s)
            await self.expire()
