"""Forget marks: what a forget left behind so that a turn already on its way cannot bring the subject back.

`forget` erases a user's or a conversation's turns from the stream, working memory and the store, but an ingestor
may hold a turn it fetched just before (it is put into working memory after the forget emptied it), and a closer
may be writing a window whose turns it read just before (its entries land after the forget deleted the others).
So a forget first writes a mark, `<tenant>.<u|c>.<id>` → the turns stream's last sequence at that moment, and:

- `accept_turn` drops a turn of a marked user or conversation whose sequence is not after the mark;
- the closer, after saving a batch, deletes the entries it just wrote of a marked user or conversation whose
  windows began before the mark (the forget, which deletes after marking, has either seen them or they see it).

Turns published after the forget (the person talks again) are later in the stream than the mark, and are kept.
Marks expire after MARK_TTL_S: by then nothing read before the forget can still be in flight (a write attempt
that fails reads its turns again, and the forget took them from working memory).
"""
import base64
import json

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig
from nats.js.errors import (
    BucketNotFoundError,
    KeyDeletedError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
)
from nats.js.kv import KeyValue

from engram_client.errors import Unavailable
from shared.messaging import untrusted
from shared.messaging.connection import transient

MARK_TTL_S = 86_400.0
MARK_ATTEMPTS = 20


def bucket_name(prefix: str) -> str:
    """Name of the bucket of forget marks (`MEM_WM_FORGOTTEN` for the default prefix)."""
    return f"{prefix.upper().replace('-', '_')}_WM_FORGOTTEN"


def mark_key(tenant: str, kind: str, subject_id: str) -> str:
    """`<tenant>.<u|c>.<id, base64url>` (ids may hold characters keys may not)."""
    return f"{tenant}.{kind}.{base64.urlsafe_b64encode(subject_id.encode()).decode().rstrip('=')}"


class ForgetMarks:
    """The forget marks of every tenant, in one key-value bucket whose keys expire after MARK_TTL_S."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, prefix: str, replicas: int = 1) -> "ForgetMarks":
        """Open the bucket, creating it (with `replicas`) on first use."""
        name = bucket_name(prefix)
        try:
            return cls(await js.key_value(name))
        except BucketNotFoundError:
            return cls(await js.create_key_value(KeyValueConfig(
                bucket=name, history=1, ttl=MARK_TTL_S, replicas=replicas,
                description="engram: a forgotten user's or conversation's turns up to this sequence are dropped")))

    async def mark(self, tenant: str, *, through_seq: int, user_id: str | None = None,
                   conversation_id: str | None = None) -> None:
        """Record that the user's or the conversation's turns up to `through_seq` are forgotten."""
        kind, subject_id = ("u", user_id) if user_id is not None else ("c", conversation_id)
        assert subject_id is not None, "a forget mark names a user or a conversation"
        key = mark_key(tenant, kind, subject_id)
        for _ in range(MARK_ATTEMPTS):  # compare-and-set: a mark only ever moves forward
            with transient("recording a forget mark"):
                try:
                    entry = await self.kv.get(key)
                except (KeyNotFoundError, KeyDeletedError):
                    entry = None
                held = _through(entry.value, key) if entry is not None else 0  # unreadable: written over
                if held >= through_seq:
                    return  # another forget of the subject reached as far
                value = json.dumps({"through_seq": through_seq}).encode()
                try:
                    if entry is None:
                        await self.kv.create(key, value)
                    else:
                        await self.kv.update(key, value, last=entry.revision)
                    return
                except KeyWrongLastSequenceError:
                    continue  # changed meanwhile: read it again
        raise Unavailable(f"the forget mark of {kind}:{subject_id!r} kept changing; ask again")

    async def through(self, tenant: str, conversation_id: str, user_id: str | None) -> int:
        """The last stream sequence forgotten for a turn of this conversation and user (0: none)."""
        found = await self._read(mark_key(tenant, "c", conversation_id))
        if user_id is not None:
            found = max(found, await self._read(mark_key(tenant, "u", user_id)))
        return found

    async def _read(self, key: str) -> int:
        with transient("reading a forget mark"):
            try:
                entry = await self.kv.get(key)
            except (KeyNotFoundError, KeyDeletedError):
                return 0
        return _through(entry.value, key)


def _through(value: bytes | None, key: str) -> int:
    """A mark's sequence; 0 for none, and for one that does not parse (reported, and written over by the next
    forget of its subject, which also erases the subject's turns from the stream)."""
    through = untrusted.read(lambda raw: int(json.loads(raw)["through_seq"]), value, "forget_marks", key)
    return max(0, through or 0)
