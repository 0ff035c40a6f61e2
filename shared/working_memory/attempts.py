"""Attempts that never finished: how often handling a message or writing a window was begun and not ended, kept in
NATS so that every replica, and the process that comes back after a crash, sees them.

An attempt is counted when it begins and forgotten when it ends, whatever its outcome (done, retried later, given
up). Only an attempt cut short by the process dying or hanging (killed by a liveness probe) leaves its count behind:
so a message or window that kills its handler every time is known to do so after a few attempts, on every replica
alike, and is set aside (dead-lettered, or a window stored as plain lines) instead of taking down each replica in
turn. Counts expire after a day.
"""
import json

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig
from nats.js.errors import BucketNotFoundError, KeyDeletedError, KeyNotFoundError
from nats.js.kv import KeyValue

from shared.messaging import untrusted
from shared.messaging.connection import transient

TTL_S = 86_400.0
MARKER_TTL_S = 60.0


def bucket_name(prefix: str) -> str:
    """Name of the bucket of attempts (`MEM_WM_ATTEMPTS` for the default prefix)."""
    return f"{prefix.upper().replace('-', '_')}_WM_ATTEMPTS"


def message_key(stream: str, seq: int) -> str:
    """The key of a stream message's attempts."""
    return f"m.{stream}.{seq}"


def window_key(conversation_key: str, first_seq: int) -> str:
    """The key of a sealed window's attempts (its conversation's key, the sequence of its first turn)."""
    return f"w.{conversation_key}.{first_seq}"


class Attempts:
    """Unfinished attempts of every tenant, in one key-value bucket whose keys expire after TTL_S."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, prefix: str, replicas: int = 1) -> "Attempts":
        """Open the bucket, creating it (with `replicas`) on first use."""
        name = bucket_name(prefix)
        try:
            return cls(await js.key_value(name))
        except BucketNotFoundError:
            return cls(await js.create_key_value(KeyValueConfig(
                bucket=name, history=1, ttl=TTL_S, replicas=replicas, limit_marker_ttl=MARKER_TTL_S,
                description="engram: attempts at a message or window begun and not ended (a crash or a hang)")))

    async def begin(self, key: str) -> int:
        """Count an attempt beginning; how many have begun without ending, this one included."""
        with transient("counting an attempt"):
            try:
                entry = await self.kv.get(key)
                before = untrusted.read(lambda raw: int(json.loads(raw)["attempts"]), entry.value, "attempts", key)
            except (KeyNotFoundError, KeyDeletedError):
                before = None
            count = max(0, before or 0) + 1
            await self.kv.put(key, json.dumps({"attempts": count}).encode())
        return count

    async def end(self, key: str) -> None:
        """The attempt ended (however): the count goes."""
        with transient("ending an attempt"):
            await self.kv.purge(key, msg_ttl=MARKER_TTL_S)
