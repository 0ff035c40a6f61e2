"""Erasing values from a key-value bucket's files: buckets that allow it, and the erase of a key's revisions.

A KV purge, a delete, an overwrite or a value pushed out by the bucket's history takes the value out of the bucket's
index but leaves its bytes in the stream's message blocks until the whole block goes (measured: they can stay for
good). The server's secure delete of one message by sequence (`$JS.API.STREAM.MSG.DELETE` without `no_erase`)
overwrites its bytes in place and syncs the block. A bucket made by nats-py's `create_key_value` refuses it
(`deny_delete`, which a stream update cannot turn off), so the buckets that hold people's words are made here as
nats-py makes a bucket, deletes allowed. A bucket an older engram made keeps working, its values purged as before,
and is reported (see `Erasable.erasable`). On a replicated bucket each node's raft log still holds a value until the
node's next snapshot (docs/guarantees.md).
"""
import asyncio
import logging
from collections.abc import Iterable

from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, KeyValueConfig, StreamConfig
from nats.js.errors import APIError, NotFoundError
from nats.js.kv import KeyValue

from engram_client import subjects
from shared.messaging import streams
from shared.messaging.connection import transient

log = logging.getLogger("engram.working_memory")
_DUPLICATE_WINDOW_S = 120.0      # nats-py's, capped by the bucket's TTL
_CONCURRENT_ERASES = 64          # requests in flight for one batch of keys (the server applies them one by one)
# What the server answers to an erase of a sequence that is no longer there (replaced, expired, erased already):
# JSStreamMsgDeleteFailedF (10057) wrapping the store's error ("message delete not permitted" is not among them),
# or, while another erase of it is applied, JSSequenceNotFoundErrF (10043).
_GONE = ("no message found", "stream store EOF")
_SEQUENCE_NOT_FOUND = 10043
_warned: set[str] = set()


def stream_config(config: KeyValueConfig, *, deny_delete: bool = False) -> StreamConfig:
    """The stream behind a bucket, as nats-py's `create_key_value` builds it, but deleting messages allowed."""
    duplicate_window = min(_DUPLICATE_WINDOW_S, config.ttl) if config.ttl else _DUPLICATE_WINDOW_S
    return StreamConfig(
        name=streams.kv_stream(config.bucket), description=config.description,
        subjects=[subjects.kv_key(config.bucket, ">")], allow_direct=config.direct, allow_rollup_hdrs=True,
        allow_msg_ttl=True, deny_delete=deny_delete, discard=DiscardPolicy.NEW, duplicate_window=duplicate_window,
        max_age=config.ttl, max_bytes=config.max_bytes, max_consumers=-1, max_msg_size=config.max_value_size,
        max_msgs=-1, max_msgs_per_subject=config.history, num_replicas=config.replicas, storage=config.storage,
        republish=config.republish, subject_delete_marker_ttl=config.limit_marker_ttl or None)


async def create(js: JetStreamContext, config: KeyValueConfig) -> KeyValue:
    """Create a bucket whose values can be erased (nats-py binds to it as to any bucket)."""
    await js.add_stream(stream_config(config))
    return await js.key_value(config.bucket)


def warn_unerasable(bucket: str) -> None:
    """Say once per process that a bucket holding people's words cannot erase them, and how to make it."""
    if bucket not in _warned:
        _warned.add(bucket)
        log.warning("the key-value bucket %s was created by an older engram with deletes denied: a forget or a closed "
                    "window takes values out of it, but their bytes stay in its files until its blocks expire. With "
                    "engram stopped, delete it (nats kv del %s) once no conversation has turns waiting (a summaries "
                    "bucket at any time: recalls fold the recent turns again); engram creates it again at start "
                    "with deletes allowed",
                    bucket, bucket)


class Erasable:
    """The values of one bucket, erased from its files by sequence (or purged, in a bucket that denies deletes)."""

    def __init__(self, js: JetStreamContext, kv: KeyValue, bucket: str, *, erasable: bool, history: int,
                 marker_ttl_s: float) -> None:
        self._js = js
        self._kv = kv
        self.bucket = bucket
        self.erasable = erasable
        self._stream = streams.kv_stream(bucket)
        self._history = history
        self._marker_ttl_s = marker_ttl_s

    def _subject(self, key: str) -> str:
        return subjects.kv_key(self.bucket, key)

    async def erase(self, key: str) -> None:
        """Erase every revision of the key, markers included (a key with none left is no error)."""
        if not self.erasable:
            with transient(f"purging {key!r} from {self.bucket}"):
                await self._kv.purge(key, msg_ttl=self._marker_ttl_s)
            return
        while True:
            with transient(f"erasing {key!r} from {self.bucket}"):
                try:
                    newest = await self._js.get_msg(self._stream, subject=self._subject(key))
                except NotFoundError:
                    return
            assert newest.seq is not None
            # With one revision per key, a value written after the read pushed this one out: read again for it.
            if await self._erase_seq(newest.seq) and self._history == 1:
                return

    async def erase_before(self, key: str, revision: int) -> None:
        """Erase the key's revisions older than `revision` (what an overwrite left in the bucket's history)."""
        if not self.erasable:
            return  # a bucket an older engram made keeps one revision: the overwrite pushed the old one out
        seq = 1
        while True:
            with transient(f"erasing old revisions of {key!r} from {self.bucket}"):
                try:
                    oldest = await self._js.get_msg(self._stream, seq=seq, subject=self._subject(key), next=True)
                except NotFoundError:
                    return
            assert oldest.seq is not None
            if oldest.seq >= revision:
                return
            await self._erase_seq(oldest.seq)
            seq = oldest.seq + 1

    async def erase_all(self, keys: Iterable[str]) -> None:
        """Erase every revision of these keys, a batch of requests in flight at a time."""
        wanted = sorted(set(keys))
        for start in range(0, len(wanted), _CONCURRENT_ERASES):
            await asyncio.gather(*(self.erase(k) for k in wanted[start:start + _CONCURRENT_ERASES]))

    async def _erase_seq(self, seq: int) -> bool:
        """Securely delete one message; False if it was gone already (erased, replaced or expired meanwhile)."""
        with transient(f"erasing message {seq} of {self._stream}"):
            try:
                await self._js.delete_msg(self._stream, seq)
            except NotFoundError:
                return False
            except APIError as exc:
                if exc.description in _GONE or exc.err_code == _SEQUENCE_NOT_FOUND:
                    return False
                raise
        return True
