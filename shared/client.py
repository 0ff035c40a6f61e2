"""MemoryClient: the async SDK a chat product or service uses to talk to engram over NATS."""
import json
import logging
from collections.abc import Sequence
from typing import Any, TypeVar

import nats
from nats.aio.client import Client
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NoStreamResponseError
from pydantic import BaseModel

from shared import subjects
from shared.contract import (
    EntriesRequest,
    EntriesResponse,
    Flush,
    RecallRequest,
    RecallResponse,
    Reply,
    Turn,
    validate_tenant,
)
from shared.errors import Timeout, Unavailable, from_code

R = TypeVar("R", bound=Reply)
log = logging.getLogger("engram.client")


async def _log_error(exc: Exception) -> None:
    # nats-py logs every failed (re)connect with a traceback by default; one line is enough.
    log.debug("nats: %s", exc)


class MemoryClient:
    """Publish turns, flush conversations, recall memories and inspect entries, for one tenant."""

    def __init__(self, nc: Client, tenant: str, prefix: str = "mem", timeout_s: float = 10.0) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self.tenant = validate_tenant(tenant)
        self._prefix = prefix
        self._timeout_s = timeout_s

    @classmethod
    async def connect(cls, url: str, tenant: str, prefix: str = "mem", timeout_s: float = 10.0,
                      reconnect_attempts: int = 10) -> "MemoryClient":
        """Connect to the NATS server engram listens on.

        Args:
            reconnect_attempts: tries (half a second apart) before giving up, on the first connect as on a
                later disconnect.
        """
        try:
            nc = await nats.connect(url, name=f"engram-client-{tenant}", connect_timeout=5, error_cb=_log_error,
                                    max_reconnect_attempts=reconnect_attempts, reconnect_time_wait=0.5)
        except Exception as exc:
            raise Unavailable(f"cannot connect to NATS at {url}: {exc}") from exc
        return cls(nc, tenant, prefix, timeout_s)

    async def close(self) -> None:
        """Flush pending publishes and disconnect."""
        await self._nc.drain()

    async def __aenter__(self) -> "MemoryClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _publish(self, subject: str, payload: bytes, headers: dict[str, str] | None = None) -> int:
        try:
            ack = await self._js.publish(subject, payload, headers=headers, timeout=self._timeout_s)
        except (NoRespondersError, NoStreamResponseError) as exc:
            raise Unavailable(f"no JetStream stream takes {subject}; is engram's ingestor running?") from exc
        except NatsTimeout as exc:
            raise Timeout(f"publishing to {subject} timed out") from exc
        return int(ack.seq)

    async def publish_turn(self, turn: Turn) -> int:
        """Publish a turn at least once (deduplicated by `<tenant>:<conversation>:<turn>`); returns its sequence."""
        return await self._publish(subjects.turns(self._prefix, self.tenant), turn.model_dump_json().encode(),
                                   headers={"Nats-Msg-Id": turn.msg_id(self.tenant)})

    async def publish_turns(self, turns: Sequence[Turn]) -> list[int]:
        """Publish many turns in order; returns their sequences."""
        return [await self.publish_turn(t) for t in turns]

    async def flush(self, conversation_id: str) -> int:
        """Close the conversation's open window (ordered after the turns published before it)."""
        return await self._publish(subjects.flush(self._prefix, self.tenant),
                                   Flush(conversation_id=conversation_id).model_dump_json().encode())

    async def _request(self, subject: str, request: BaseModel, reply_type: type[R]) -> R:
        try:
            msg = await self._nc.request(subject, request.model_dump_json(exclude_none=True).encode(),
                                         timeout=self._timeout_s)
        except NoRespondersError as exc:
            raise Unavailable(f"nobody answers {subject}; is engram's retriever running?") from exc
        except NatsTimeout as exc:
            raise Timeout(f"{subject} did not answer within {self._timeout_s}s") from exc
        reply = reply_type.model_validate_json(msg.data)
        if reply.error is not None:
            raise from_code(reply.error.code, reply.error.message)
        return reply

    async def recall(self, query: str | RecallRequest, **fields: Any) -> RecallResponse:
        """Memories relevant to `query` (a string plus RecallRequest fields, or a whole RecallRequest)."""
        request = query if isinstance(query, RecallRequest) else RecallRequest(query=query, **fields)
        return await self._request(subjects.recall(self._prefix, self.tenant), request, RecallResponse)

    async def entries(self, request: EntriesRequest | None = None, **fields: Any) -> EntriesResponse:
        """List, get or trace stored entries (admin)."""
        return await self._request(subjects.entries(self._prefix, self.tenant),
                                   request or EntriesRequest(**fields), EntriesResponse)

    async def raw_request(self, kind: str, payload: bytes) -> dict[str, Any]:
        """Send raw bytes to `<prefix>.<tenant>.<kind>` and return the decoded reply (for debugging and tests)."""
        msg = await self._nc.request(f"{self._prefix}.{self.tenant}.{kind}", payload, timeout=self._timeout_s)
        result: dict[str, Any] = json.loads(msg.data)
        return result


async def publish_sessions(client: MemoryClient, sessions: Sequence[Sequence[Turn]]) -> None:
    """Publish each conversation's turns and flush it, as a chat product does at the end of a session."""
    for turns in sessions:
        if turns:
            await client.publish_turns(turns)
            await client.flush(turns[0].conversation_id)


async def wait_until_stored(client: MemoryClient, turns: Sequence[Turn], timeout_s: float = 120.0,
                            interval_s: float = 0.5) -> None:
    """Wait until every turn is a source of some stored entry (flush the conversations first)."""
    import asyncio
    import time

    pending: dict[str, set[str]] = {}
    for turn in turns:
        pending.setdefault(turn.conversation_id, set()).add(turn.turn_id)
    deadline = time.monotonic() + timeout_s
    while pending:
        for conversation_id in list(pending):
            cursor = None
            while True:
                page = await client.entries(op="list", conversation_id=conversation_id, limit=500, cursor=cursor)
                for entry in page.entries:
                    pending[conversation_id] -= set(entry.source_turn_ids)
                cursor = page.next_cursor
                if cursor is None or not pending[conversation_id]:
                    break
            if not pending[conversation_id]:
                del pending[conversation_id]
        if pending:
            if time.monotonic() > deadline:
                missing = sum(len(v) for v in pending.values())
                raise Timeout(f"{missing} turns in {len(pending)} conversations not stored after {timeout_s}s")
            await asyncio.sleep(interval_s)
