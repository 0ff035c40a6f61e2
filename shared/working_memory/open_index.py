"""The open index: the conversations that have turns waiting in a window, so that finding idle windows costs in
proportion to them, not to every conversation engram ever saw (buffers live for days after their last window).

Each replica follows the index with a KV watch and keeps it in memory; a sweep then reads only the buffers whose
turn is due. The index can never miss an active buffer:

- a write that makes a buffer active marks it *after* its compare-and-set, and a redelivered turn marks again, so a
  crash between the two is healed by the redelivery that must follow (the turn was not acked);
- only the closer unmarks (after a sweep, or after writing a window): it reads the mark's revision, then the
  buffer, and purges the mark only if the buffer is inactive and the mark still has that revision (the purge's
  marker expires, so nothing is left behind). A writer that activated the buffer after the closer read it has
  marked since (the revision changed, the purge fails) or will mark after the purge (the mark comes back).
"""
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from nats.js import JetStreamContext
from nats.js.errors import BadRequestError, KeyDeletedError, KeyNotFoundError
from nats.js.kv import KeyValue

from engram_client import subjects
from shared.messaging import streams, untrusted
from shared.messaging.connection import transient
from shared.working_memory.buffer import Buffer


@dataclass(frozen=True)
class Mark:
    """A change of the index: a conversation became active (`since` set) or was unmarked (`since` None)."""

    tenant: str
    conversation_id: str
    since: datetime | None


class OpenIndex:
    """One key per active conversation, `<tenant>.<conversation>`, holding when it became active."""

    def __init__(self, js: JetStreamContext, kv: KeyValue, bucket: str, key: Callable[[str, str], str],
                 conversation_of: Callable[[str], tuple[str, str]], marker_ttl_s: float) -> None:
        self._js = js
        self._kv = kv
        self._bucket = bucket
        self._key = key
        self._conversation_of = conversation_of
        self._marker_ttl_s = marker_ttl_s

    async def mark(self, tenant: str, conversation_id: str, since: datetime) -> None:
        """Record that the conversation has turns waiting (a put: every mark changes the revision)."""
        with transient(f"marking conversation {conversation_id!r} open"):
            await self._kv.put(self._key(tenant, conversation_id), json.dumps({"since": since.isoformat()}).encode())

    async def unmark_if_inactive(self, tenant: str, conversation_id: str,
                                 read_buffer: Callable[[], Awaitable[Buffer | None]]) -> bool:
        """Delete the mark if the buffer (read after the mark) has nothing waiting; True if it was deleted."""
        k = self._key(tenant, conversation_id)
        with transient(f"reading the open mark of conversation {conversation_id!r}"):
            try:
                revision = (await self._kv.get(k)).revision
            except (KeyNotFoundError, KeyDeletedError):
                return False
        buffer = await read_buffer()
        if buffer is not None and buffer.active:
            return False
        # A purge only if the mark is still that revision, whose marker expires: KeyValue.delete(last=...) would
        # leave a tombstone per conversation for the bucket's TTL, and every watch would list them all again.
        headers = {"KV-Operation": "PURGE", "Nats-Rollup": "sub", "Nats-Expected-Last-Subject-Sequence": str(revision)}
        with transient(f"unmarking conversation {conversation_id!r}"):
            try:
                await self._js.publish(subjects.kv_key(self._bucket, k), b"", headers=headers,
                                       msg_ttl=self._marker_ttl_s)
            except BadRequestError as exc:
                if exc.err_code in (10071, 10164):  # wrong last sequence: marked again meanwhile, it is active
                    return False
                raise
        return True

    async def forget(self, tenant: str, conversation_id: str) -> None:
        """Remove the conversation's mark whatever its buffer holds (Forget removed the buffer)."""
        with transient(f"unmarking conversation {conversation_id!r}"):
            await self._kv.purge(self._key(tenant, conversation_id), msg_ttl=self._marker_ttl_s)

    async def marked(self, tenant: str) -> list[tuple[str, str]]:
        """(tenant, conversation id) of every conversation of `tenant` marked now."""
        found = [untrusted.read(lambda raw: self._conversation_of(raw.decode()), k.encode(), "open_index", k)
                 for k in await streams.kv_keys(self._js, self._bucket, f"{tenant}.>")]
        return [c for c in found if c is not None]

    async def follow(self) -> AsyncIterator[Mark | None]:
        """Every current mark, then None once they have all been seen, then every change as it happens.

        A key engram did not write is skipped; a mark whose value does not parse reads as marked now, so the
        conversation is looked at (and unmarked if nothing waits): neither stops the watch.
        """
        watcher = await self._kv.watch(">")
        try:
            async for entry in watcher:
                if entry is None:
                    yield None
                    continue
                conversation = untrusted.read(lambda raw: self._conversation_of(raw.decode()), entry.key.encode(),
                                              "open_index", entry.key)
                if conversation is None:
                    continue
                tenant, conversation_id = conversation
                if entry.operation is not None or not entry.value:  # a delete or purge marker
                    yield Mark(tenant, conversation_id, None)
                else:
                    since = untrusted.read(_since, entry.value, "open_index", entry.key)
                    yield Mark(tenant, conversation_id, since or datetime.now(UTC))
        finally:
            await watcher.stop()  # type: ignore[no-untyped-call]


def _since(value: bytes) -> datetime:
    """When a mark says its conversation became active (an aware time)."""
    since = datetime.fromisoformat(json.loads(value)["since"])
    if since.tzinfo is None:
        raise ValueError("a mark's time has no zone")
    return since
