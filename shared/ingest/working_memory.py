"""Working memory: one buffer per conversation in a JetStream key-value bucket, changed only by compare-and-set."""
import asyncio
import base64
import random
from collections.abc import Callable
from typing import TypeVar

from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig
from nats.js.errors import (
    BucketNotFoundError,
    KeyDeletedError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
)
from nats.js.kv import KeyValue

from shared.errors import Timeout, Unavailable
from shared.ingest.buffer import Buffer

R = TypeVar("R")
_CAS_ATTEMPTS = 100


def bucket_name(prefix: str) -> str:
    """Name of the working-memory bucket (`MEM_WM` for the default prefix)."""
    return f"{prefix.upper().replace('-', '_')}_WM"


def key(tenant: str, conversation_id: str) -> str:
    """KV key of a conversation: `<tenant>.<conversation id, base64url>` (ids may hold characters keys may not)."""
    encoded = base64.urlsafe_b64encode(conversation_id.encode()).decode().rstrip("=")
    return f"{tenant}.{encoded}"


def conversation_of(kv_key: str) -> tuple[str, str]:
    """The (tenant, conversation id) a KV key stands for."""
    tenant, encoded = kv_key.split(".", 1)
    return tenant, base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()


class WorkingMemory:
    """Buffers of open and sealed windows, shared by every ingestor replica through one KV bucket."""

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, prefix: str, ttl_s: float | None = None) -> "WorkingMemory":
        """Open the bucket, creating it on first use.

        Args:
            ttl_s: forget a conversation's buffer this long after its last change (None: keep).
        """
        name = bucket_name(prefix)
        try:
            kv = await js.key_value(name)
        except BucketNotFoundError:
            kv = await js.create_key_value(KeyValueConfig(bucket=name, history=1, ttl=ttl_s,
                                                          description="engram working memory"))
        return cls(kv)

    async def get(self, tenant: str, conversation_id: str) -> Buffer | None:
        """The conversation's buffer, or None if engram holds nothing for it."""
        try:
            entry = await self._kv.get(key(tenant, conversation_id))
        except (KeyNotFoundError, KeyDeletedError):
            return None
        except NatsTimeout as exc:
            raise Timeout(f"working memory read for conversation {conversation_id!r} timed out") from exc
        return Buffer.model_validate_json(entry.value) if entry.value else None

    async def update(self, tenant: str, conversation_id: str,
                     change: Callable[[Buffer], tuple[Buffer, R]]) -> tuple[Buffer, R]:
        """Apply `change` with compare-and-set, retrying on conflict with another replica's write."""
        k = key(tenant, conversation_id)
        for attempt in range(_CAS_ATTEMPTS):
            try:
                try:
                    entry = await self._kv.get(k)
                    current = Buffer.model_validate_json(entry.value) if entry.value else None
                    revision: int | None = entry.revision
                except (KeyNotFoundError, KeyDeletedError):
                    current, revision = None, None
                before = current or Buffer(tenant_id=tenant, conversation_id=conversation_id)
                after, result = change(before)
                if after == before and current is not None:
                    return after, result
                value = after.model_dump_json().encode()
                if revision is None:
                    await self._kv.create(k, value)
                else:
                    await self._kv.update(k, value, last=revision)
                return after, result
            except KeyWrongLastSequenceError:
                await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))  # another replica wrote first
            except NatsTimeout as exc:
                raise Timeout(f"working memory write for conversation {conversation_id!r} timed out") from exc
        raise Unavailable(f"working memory for conversation {conversation_id!r} kept changing under "
                          f"{_CAS_ATTEMPTS} compare-and-set attempts")

    async def conversations(self, tenant: str | None = None) -> list[tuple[str, str]]:
        """(tenant, conversation id) of every buffer, or of one tenant's."""
        # KeyValue.keys(filters=...) matches substrings, not subjects; a wildcard watch lists exactly.
        keys = []
        try:
            watcher = await self._kv.watch(f"{tenant}.>" if tenant else ">", ignore_deletes=True, meta_only=True)
            try:
                async for entry in watcher:
                    if entry is None:  # the watcher's marker: every current key has been seen
                        break
                    keys.append(entry.key)
            finally:
                await watcher.stop()  # type: ignore[no-untyped-call]
        except NatsTimeout as exc:
            raise Timeout("listing working memory timed out") from exc
        return [conversation_of(k) for k in keys]

    async def delete(self, tenant: str, conversation_id: str) -> bool:
        """Forget a conversation's buffer entirely; True if there was one."""
        k = key(tenant, conversation_id)
        try:
            await self._kv.get(k)
        except (KeyNotFoundError, KeyDeletedError):
            return False
        await self._kv.purge(k)
        return True

