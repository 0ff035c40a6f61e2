"""Working memory in five JetStream key-value buckets, shared by every replica of every service.

- `<P>_WM_BUFFERS`: one small buffer of references per conversation (buffer.py), changed only by compare-and-set.
- `<P>_WM_TURNS`: each turn's text under its own key, written before a buffer refers to it and erased once none
  does. A legal turn always fits in one value, so any sequence of legal turns can be stored.
- `<P>_WM_OPEN`: the open index, one key per conversation with turns waiting in a window (see open_index.py).
- `<P>_WM_SUMMARIES`: the running summary of a conversation's older recent turns, when they outgrow the summary
  budget (see shared/retrieval/summary.py); forgotten with the conversation, or with any user whose words it holds.
  A summary written over erases the one before it (the bucket keeps a few revisions so that the old one is still
  there to erase).
- `<P>_WM_FORGOTTEN`: the forget marks that keep a turn already in flight from bringing a forgotten one back
  (see forgotten.py).
- `<P>_WM_ATTEMPTS`: attempts at a message or a window that were begun and never ended (see attempts.py).

The two buckets that hold people's words (turn texts and summaries) are erased, not purged: a purge leaves the
value's bytes in the bucket's files (see erasure.py). The others hold ids, sequences, digests and times only; their
purges leave markers that expire after MARKER_TTL_S (per-message TTL), so deleted keys cost nothing later.
"""
import asyncio
import base64
import random
from collections.abc import Callable, Iterable
from typing import Literal, TypeVar

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig
from nats.js.errors import BucketNotFoundError, KeyDeletedError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue
from pydantic import BaseModel, ConfigDict, Field

from engram_client.contract import Turn
from engram_client.errors import Unavailable
from shared.errors import ConfigError
from shared.messaging import streams, untrusted
from shared.messaging.connection import transient
from shared.runtime import metrics
from shared.working_memory import buffer as buffers
from shared.working_memory import erasure
from shared.working_memory.attempts import Attempts
from shared.working_memory.buffer import Buffer
from shared.working_memory.erasure import Erasable
from shared.working_memory.forgotten import ForgetMarks
from shared.working_memory.open_index import OpenIndex

R = TypeVar("R")
_CAS_ATTEMPTS = 100
MARKER_TTL_S = 60.0
# Revisions a summary key keeps: the one written over stays until its writer erases it, even when a few writers of
# the same conversation's summary race (past that many, the oldest is pushed out unerased).
SUMMARY_HISTORY = 8


def bucket_names(prefix: str) -> tuple[str, str, str]:
    """Names of the buffers, turns and open-index buckets (`MEM_WM_BUFFERS`… for the default prefix)."""
    base = f"{prefix.upper().replace('-', '_')}_WM"
    return f"{base}_BUFFERS", f"{base}_TURNS", f"{base}_OPEN"


def summaries_bucket_name(prefix: str) -> str:
    """Name of the bucket of running summaries (`MEM_WM_SUMMARIES` for the default prefix)."""
    return f"{prefix.upper().replace('-', '_')}_WM_SUMMARIES"


class CachedSummary(BaseModel):
    """A conversation's running summary: the turns it covers end with `through_turn_id`."""

    model_config = ConfigDict(frozen=True)

    through_turn_id: str
    text: str
    source: Literal["model", "extractive"]
    user_ids: list[str] = Field(default_factory=list)  # whose words it holds (Forget finds it by them)


def key(tenant: str, conversation_id: str) -> str:
    """KV key of a conversation: `<tenant>.<conversation id, base64url>` (ids may hold characters keys may not)."""
    encoded = base64.urlsafe_b64encode(conversation_id.encode()).decode().rstrip("=")
    return f"{tenant}.{encoded}"


def turn_key(tenant: str, conversation_id: str, seq: int) -> str:
    """KV key of one turn's text: `<conversation key>.<stream sequence>`."""
    return f"{key(tenant, conversation_id)}.{seq}"


def conversation_of(kv_key: str) -> tuple[str, str]:
    """The (tenant, conversation id) a conversation's KV key stands for.

    Raises:
        ValueError: the key is not one engram wrote.
    """
    tenant, encoded = kv_key.split(".")[:2]
    return tenant, base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()


def conversations_in(keys: Iterable[str], place: str) -> list[tuple[str, str]]:
    """The conversations these KV keys stand for; a key engram did not write is reported and left out."""
    found = (untrusted.read(lambda raw: conversation_of(raw.decode()), k.encode(), place, k) for k in keys)
    return [c for c in found if c is not None]


async def _bucket(js: JetStreamContext, name: str, ttl_s: float | None, description: str, replicas: int) -> KeyValue:
    return (await _open_bucket(js, name, ttl_s, description, replicas))[0]


async def _open_bucket(js: JetStreamContext, name: str, ttl_s: float | None, description: str, replicas: int,
                       erasable: bool = False, history: int = 1) -> tuple[KeyValue, bool]:
    """The bucket, created on first use; and whether its values can be erased (`erasable` asks that they can)."""
    try:
        kv = await js.key_value(name)
    except BucketNotFoundError:
        pass
    else:
        have = (await js.stream_info(streams.kv_stream(name))).config
        if not have.allow_msg_ttl:
            raise ConfigError(f"the key-value bucket {name} was created without per-message TTLs, which engram's "
                              f"purges need; delete it (nats kv del {name}) once no conversation has turns waiting")
        if erasable and have.deny_delete:
            erasure.warn_unerasable(name)
        return kv, erasable and not have.deny_delete
    # limit_marker_ttl turns on per-message TTLs, which purge markers use so that they expire.
    config = KeyValueConfig(bucket=name, history=history, ttl=ttl_s, description=description,
                            limit_marker_ttl=MARKER_TTL_S, replicas=replicas)
    return (await erasure.create(js, config) if erasable else await js.create_key_value(config)), erasable


class WorkingMemory:
    """Buffers, turn texts and the open index of every conversation engram is still collecting turns for."""

    def __init__(self, js: JetStreamContext, prefix: str, buffers: KeyValue, turns: KeyValue,
                 index: OpenIndex, summaries: KeyValue, forgotten: ForgetMarks, attempts: Attempts,
                 erasable: tuple[bool, bool] = (True, True)) -> None:
        """Working memory over buckets already opened (see `open`).

        Args:
            erasable: whether the turns and the summaries buckets allow erasing values (an older engram's do not).
        """
        self._js = js
        self._buffers_bucket, self._turns_bucket, _ = bucket_names(prefix)
        self._summaries_bucket = summaries_bucket_name(prefix)
        self.buffers = buffers
        self.turn_texts = turns
        self.index = index
        self.summaries = summaries
        self.forgotten = forgotten
        self.attempts = attempts
        self._texts = Erasable(js, turns, self._turns_bucket, erasable=erasable[0], history=1,
                               marker_ttl_s=MARKER_TTL_S)
        self._summary_revisions = Erasable(js, summaries, self._summaries_bucket, erasable=erasable[1],
                                           history=SUMMARY_HISTORY, marker_ttl_s=MARKER_TTL_S)

    @property
    def unerasable(self) -> tuple[str, ...]:
        """The buckets holding people's words that an older engram made with deletes denied: values taken out of
        them are purged, and their bytes stay in the bucket's files until its blocks expire (empty when all is
        well; the warning logged at open says how to make them again)."""
        return tuple(e.bucket for e in (self._texts, self._summary_revisions) if not e.erasable)

    @classmethod
    async def open(cls, js: JetStreamContext, prefix: str, ttl_s: float | None = None,
                   replicas: int = 1) -> "WorkingMemory":
        """Open the buckets, creating them on first use.

        Args:
            ttl_s: forget a conversation's buffer and turns this long after their last change (None: keep).
            replicas: of a bucket this creates (one that exists keeps its own).
        """
        buffers, turns, open_index = bucket_names(prefix)
        # Marks never expire by age: one stays while its conversation has turns waiting, however long.
        index = await _bucket(js, open_index, None, "engram working memory: conversations with open windows",
                              replicas)
        texts, texts_erasable = await _open_bucket(js, turns, ttl_s, "engram working memory: turn texts", replicas,
                                                   erasable=True)
        summaries, summaries_erasable = await _open_bucket(
            js, summaries_bucket_name(prefix), ttl_s, "engram working memory: running summaries of older turns",
            replicas, erasable=True, history=SUMMARY_HISTORY)
        return cls(js, prefix, await _bucket(js, buffers, ttl_s, "engram working memory: a buffer per conversation",
                                             replicas),
                   texts, OpenIndex(js, index, open_index, key, conversation_of, MARKER_TTL_S), summaries,
                   await ForgetMarks.open(js, prefix, replicas), await Attempts.open(js, prefix, replicas),
                   erasable=(texts_erasable, summaries_erasable))

    async def summary(self, tenant: str, conversation_id: str) -> CachedSummary | None:
        """The conversation's running summary, if one was made."""
        with transient(f"reading the summary of conversation {conversation_id!r}"):
            try:
                entry = await self.summaries.get(key(tenant, conversation_id))
            except (KeyNotFoundError, KeyDeletedError):
                return None
        return untrusted.model(CachedSummary, entry.value, "summaries", entry.key)

    async def put_summary(self, tenant: str, conversation_id: str, summary: CachedSummary) -> None:
        """Store the conversation's running summary (last writer wins: any summary of the same turns will do), and
        erase the one it replaces."""
        k = key(tenant, conversation_id)
        with transient(f"storing the summary of conversation {conversation_id!r}"):
            revision = await self.summaries.put(k, summary.model_dump_json().encode())
        await self._summary_revisions.erase_before(k, revision)

    async def forget_summaries(self, tenant: str, conversation_id: str | None = None,
                               user_id: str | None = None) -> int:
        """Delete the conversation's summary, or every summary of the tenant holding the user's words."""
        if conversation_id is not None:
            wanted = [key(tenant, conversation_id)]
        else:
            wanted = []
            for k in await streams.kv_keys(self._js, self._summaries_bucket, f"{tenant}.>"):
                readable = conversations_in([k], "summaries")
                found = await self.summary(*readable[0]) if readable else None
                if found is not None and (user_id is None or user_id in found.user_ids):
                    wanted.append(k)
        deleted = 0
        for k in wanted:
            with transient("forgetting summaries"):
                try:
                    await self.summaries.get(k)
                except (KeyNotFoundError, KeyDeletedError):
                    continue
            await self._summary_revisions.erase(k)  # every revision it kept, whatever the newest says
            deleted += 1
        return deleted

    async def get(self, tenant: str, conversation_id: str) -> Buffer | None:
        """The conversation's buffer, or None if engram holds nothing for it."""
        with transient(f"reading the buffer of conversation {conversation_id!r}"):
            try:
                entry = await self.buffers.get(key(tenant, conversation_id))
            except (KeyNotFoundError, KeyDeletedError):
                return None
        return untrusted.model(Buffer, entry.value, "buffers", entry.key)

    async def update(self, tenant: str, conversation_id: str,
                     change: Callable[[Buffer | None], tuple[Buffer | None, R]]) -> tuple[Buffer | None, R]:
        """Apply `change` with compare-and-set, retrying on conflict with another replica's write.

        `change` gets the current buffer (None if there is none) and returns the new one; returning None or the
        buffer unchanged writes nothing (so a no-op never creates a key). Turn texts that the old buffer referred
        to and the new one does not are erased after the write.
        """
        k = key(tenant, conversation_id)
        for attempt in range(_CAS_ATTEMPTS):
            with transient(f"writing the buffer of conversation {conversation_id!r}"):
                try:
                    try:
                        entry = await self.buffers.get(k)
                        # An unreadable buffer is written over (repaired) by this change.
                        current = untrusted.model(Buffer, entry.value, "buffers", k)
                        revision: int | None = entry.revision
                    except (KeyNotFoundError, KeyDeletedError):
                        current, revision = None, None
                    after, result = change(current)
                    if after is None or after == current:
                        return current, result
                    value = after.model_dump_json().encode()
                    if revision is None:
                        await self.buffers.create(k, value)
                    else:
                        await self.buffers.update(k, value, last=revision)
                except KeyWrongLastSequenceError:  # another replica wrote first (create raises this too)
                    metrics.kv_conflicts_total.inc()
                    await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
                    continue
            if current is not None:
                await self.forget_turns(tenant, conversation_id, current.referenced() - after.referenced())
            return after, result
        raise Unavailable(f"working memory for conversation {conversation_id!r} kept changing under "
                          f"{_CAS_ATTEMPTS} compare-and-set attempts")

    async def put_turn(self, tenant: str, turn: Turn, seq: int) -> None:
        """Store a turn's text under its stream sequence (idempotent: a redelivery finds it stored and writes nothing,
        for a value written over would stay in the bucket's files unerased)."""
        k, value = turn_key(tenant, turn.conversation_id, seq), turn.model_dump_json().encode()
        with transient(f"storing the text of turn {turn.turn_id!r}"):
            try:
                await self.turn_texts.create(k, value)
                return
            except KeyWrongLastSequenceError:  # stored already
                try:
                    if (await self.turn_texts.get(k)).value == value:
                        return
                except (KeyNotFoundError, KeyDeletedError):
                    pass  # taken out meanwhile
        await self._texts.erase(k)  # something else, or gone meanwhile: this turn's text replaces it
        with transient(f"storing the text of turn {turn.turn_id!r}"):
            await self.turn_texts.put(k, value)

    async def turns(self, tenant: str, conversation_id: str, seqs: Iterable[int]) -> dict[int, Turn]:
        """The texts of these turns by sequence (a purged or expired one is missing from the result)."""
        wanted = sorted(set(seqs))

        async def one(seq: int) -> Turn | None:
            try:
                entry = await self.turn_texts.get(turn_key(tenant, conversation_id, seq))
            except (KeyNotFoundError, KeyDeletedError):
                return None
            return untrusted.model(Turn, entry.value, "turns", entry.key)

        with transient(f"reading turns of conversation {conversation_id!r}"):
            found = await asyncio.gather(*(one(s) for s in wanted))
        return {seq: turn for seq, turn in zip(wanted, found, strict=True) if turn is not None}

    async def forget_turns(self, tenant: str, conversation_id: str, seqs: Iterable[int]) -> None:
        """Erase these turns' texts from the bucket's files (a crash before this leaves them to the bucket's TTL)."""
        await self._texts.erase_all(turn_key(tenant, conversation_id, seq) for seq in seqs)

    async def conversations(self, tenant: str | None = None) -> list[tuple[str, str]]:
        """(tenant, conversation id) of every buffer, or of one tenant's: an admin listing, not a hot path."""
        pattern = f"{tenant}.>" if tenant else ">"
        return conversations_in(await streams.kv_keys(self._js, self._buffers_bucket, pattern), "buffers")

    async def held_turns(self, tenant: str) -> dict[str, dict[int, Turn]]:
        """Every turn text of `tenant` held now, by conversation and sequence (for Forget: reads them all)."""
        wanted: dict[str, list[int]] = {}
        for k in await streams.kv_keys(self._js, self._turns_bucket, f"{tenant}.>"):
            held = untrusted.read(lambda raw: (conversation_of(raw.decode())[1], int(raw.decode().rsplit(".", 1)[1])),
                                  k.encode(), "turns", k)
            if held is not None:
                wanted.setdefault(held[0], []).append(held[1])
        return {c: await self.turns(tenant, c, seqs) for c, seqs in wanted.items()}

    async def text_count(self, tenant: str, conversation_id: str) -> int:
        """How many turn texts of the conversation are held."""
        return len(await streams.kv_keys(self._js, self._turns_bucket, f"{key(tenant, conversation_id)}.>"))

    async def forget_conversation(self, tenant: str, conversation_id: str) -> tuple[int, int]:
        """Delete the conversation's buffer, every text it holds and its open-index mark.

        Returns (1 if there was a buffer else 0, turn texts deleted).
        """
        k = key(tenant, conversation_id)
        texts = await streams.kv_keys(self._js, self._turns_bucket, f"{k}.>")
        had_buffer = await self.get(tenant, conversation_id) is not None
        if had_buffer:  # references and digests only: purged (its marker expires)
            with transient(f"forgetting conversation {conversation_id!r}"):
                await self.buffers.purge(k, msg_ttl=MARKER_TTL_S)
        await self._texts.erase_all(texts)
        await self.index.forget(tenant, conversation_id)
        return int(had_buffer), len(texts)

    async def forget_turns_of(self, tenant: str, conversation_id: str, seqs: set[int]) -> Buffer | None:
        """Take these turns out of the conversation's windows and recent turns, and delete their texts; the rest of
        the conversation (another person's turns) stays and is written as usual. The buffer after."""
        after, referred = await self.update(tenant, conversation_id, lambda b: (
            buffers.without(b, seqs) if b else None, b.referenced() if b else set()))
        # update() erased the texts the buffer referred to; erase the others here, each once.
        await self.forget_turns(tenant, conversation_id, seqs - referred)
        return after

