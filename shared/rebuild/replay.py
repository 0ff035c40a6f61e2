"""The turns the stream retains, read again in stream order and cut into windows the way the ingestor would.

Which turns a rebuild re-derives is decided from the live build, read once before the stream (the cut): a turn is
replayed when it is a source of an episode there, and every episode holding it has all its turns still in the
stream up to the cut. So an episode is either re-derived whole or carried over whole (its oldest turns expired, or
it was written after the cut), and a turn not yet in any episode is left to the running ingestor, which writes it
into whichever build is live. The same pure buffer transitions as the ingestor (shared/working_memory/buffer.py)
decide the windows: `window_turns` turns, a flush, or an idle gap of `idle_timeout_s` by the stream's own timestamps.
"""
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pydantic import ValidationError

from engram_client import subjects
from engram_client.contract import Flush, Turn, check_tenant
from engram_client.errors import EngramError
from shared.compress import Window
from shared.messaging.connection import transient
from shared.messaging.streams import TurnsStream
from shared.store import EntryFilter, Scope, Store, pages
from shared.working_memory import buffer as buffers
from shared.working_memory.buffer import Buffer

log = logging.getLogger("engram.rebuild")
_FETCH, _FETCH_S, _IDLE_S = 256, 5.0, 3600.0
TurnKey = tuple[str, str, str]  # tenant, conversation, turn id


@dataclass
class Message:
    """One message of the turns stream, parsed (a turn, a flush, or None when unreadable)."""

    tenant: str
    seq: int
    at: datetime
    body: Turn | Flush | None


@dataclass
class Written:
    """The live build's episodes at the cut, by turn: which turns are in memory, and with which others."""

    episodes: dict[str, list[TurnKey]] = field(default_factory=dict)
    by_turn: dict[TurnKey, list[str]] = field(default_factory=dict)

    def add(self, entry_id: str, turns: list[TurnKey]) -> None:
        """Note one episode and its turns."""
        self.episodes[entry_id] = turns
        for key in turns:
            self.by_turn.setdefault(key, []).append(entry_id)

    def replayable(self, retained: set[TurnKey]) -> set[TurnKey]:
        """The turns to re-derive: in an episode, and every episode holding them is wholly retained."""
        whole = {e for e, turns in self.episodes.items() if all(t in retained for t in turns)}
        return {key for key, episodes in self.by_turn.items() if all(e in whole for e in episodes)}


async def written(store: Store) -> Written:
    """Every episode of the build, by turn. A merge keeper's source turns include its members', which may come
    from other conversations: each member's turns are keyed by its own conversation, and the keeper counts as one
    episode with them, so a merged group is re-derived whole or carried over whole."""
    found = Written()
    for tenant in await store.tenants():
        episodes = [e async for page in pages(store, Scope(tenant_id=tenant), EntryFilter(kinds=["episodic"]))
                    for e in page.entries]
        members: dict[str, list[TurnKey]] = {}
        for entry in episodes:
            if entry.merged_into is not None:
                members.setdefault(entry.merged_into, []).extend(
                    (tenant, entry.conversation_id, t) for t in entry.source_turn_ids)
        for entry in episodes:
            theirs = {key[2] for key in members.get(entry.id, [])}
            own = [(tenant, entry.conversation_id, t) for t in entry.source_turn_ids if t not in theirs]
            found.add(entry.id, own + members.get(entry.id, []))
    return found


@dataclass
class Replay:
    """Windows cut from the replayed turns, and what was read to cut them."""

    window_turns: int
    idle_timeout_s: float
    wanted: set[TurnKey]                                # the turns to re-derive
    turns_replayed: int = 0
    turns_left: int = 0                                 # turns of the stream not re-derived (carried or live)
    unreadable: int = 0
    covered: set[TurnKey] = field(default_factory=set)  # what the new build holds
    _buffers: dict[tuple[str, str], Buffer] = field(default_factory=dict)
    _texts: dict[tuple[str, str], dict[int, Turn]] = field(default_factory=dict)

    def apply(self, message: Message) -> list[Window]:
        """Feed one message; the windows it closed."""
        if isinstance(message.body, Turn):
            return self._turn(message.tenant, message.body, message.seq, message.at)
        if isinstance(message.body, Flush):
            return self._flush(message.tenant, message.body, message.seq, message.at)
        self.unreadable += 1
        return []

    def _turn(self, tenant: str, turn: Turn, seq: int, at: datetime) -> list[Window]:
        key = (tenant, turn.conversation_id)
        if (tenant, turn.conversation_id, turn.turn_id) not in self.wanted:
            self.turns_left += 1
            return []
        before = self._idle(key, at)
        current = self._buffers.get(key) or Buffer(tenant_id=tenant, conversation_id=turn.conversation_id)
        after, new = buffers.append(current, turn.turn_id, seq, turn.ts, at, window_turns=self.window_turns,
                                    recent_turns=0)
        if new:
            self.turns_replayed += 1
            self.covered.add((tenant, turn.conversation_id, turn.turn_id))
            self._texts.setdefault(key, {})[seq] = turn
        self._buffers[key] = after
        return before + self._drain(key)

    def _flush(self, tenant: str, flush: Flush, seq: int, at: datetime) -> list[Window]:
        key = (tenant, flush.conversation_id)
        if key not in self._buffers:
            return []
        self._buffers[key] = buffers.flush(self._buffers[key], seq, at)
        return self._drain(key)

    def rest(self) -> list[Window]:
        """Close every window still open (each of these turns was in a closed window of the live build)."""
        out: list[Window] = []
        for key, buffer in self._buffers.items():
            if buffer.open:
                at = buffer.last_turn_at or datetime.now(UTC)
                self._buffers[key] = buffers.flush(buffer, max(buffer.open) + 1, at)
                out += self._drain(key)
        return out

    def _idle(self, key: tuple[str, str], at: datetime) -> list[Window]:
        buffer = self._buffers.get(key)
        if buffer is None:
            return []
        self._buffers[key] = buffers.seal_idle(buffer, at, self.idle_timeout_s)
        return self._drain(key)

    def _drain(self, key: tuple[str, str]) -> list[Window]:
        buffer = self._buffers[key]
        texts = self._texts.get(key, {})
        out: list[Window] = []
        for sealed in buffer.sealed:
            turns = [texts[s] for s in sealed.seqs if s in texts]
            context = [texts[sealed.context]] if sealed.context in texts else []
            if turns:
                out.append(Window(tenant_id=key[0], conversation_id=key[1], turns=turns, context=context))
            buffer = buffers.complete(buffer, sealed.seqs)
        self._buffers[key] = buffer
        keep = buffer.referenced()
        self._texts[key] = {s: t for s, t in texts.items() if s in keep}
        return out


def parse(subject: str, data: bytes, seq: int, at: datetime) -> Message:
    """A stream message as a turn or a flush of its subject's tenant; None as body when it is neither (such
    messages were dead-lettered by the ingestor, and stay in the stream until they expire)."""
    tenant, kind = subjects.parse(subject)
    body: Turn | Flush | None = None
    try:
        if kind == "turns":
            body = Turn.model_validate_json(data)
        elif kind == "flush":
            body = Flush.model_validate_json(data)
        if body is not None:
            check_tenant(body, tenant)
    except (ValidationError, EngramError):
        body = None
    return Message(tenant=tenant, seq=seq, at=at, body=body)


async def read(js: JetStreamContext, cut: dict[TurnsStream, int]) -> AsyncIterator[list[Message]]:
    """The messages of every turns stream up to its sequence in `cut`, a stream after another, each in stream
    order, a batch at a time (a tenant's turns are all in one stream, so each tenant's come in their order)."""
    for stream, through in cut.items():
        async for batch in _read_one(js, stream, through):
            yield batch


async def _read_one(js: JetStreamContext, stream: TurnsStream, through: int) -> AsyncIterator[list[Message]]:
    name = f"engram-rebuild-{uuid.uuid4().hex}"
    config = ConsumerConfig(name=name, filter_subjects=list(stream.filter_subjects),
                            deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE, mem_storage=True,
                            inactive_threshold=_IDLE_S)
    if through <= 0:
        return
    with transient("reading the turns stream for a rebuild"):
        await js.add_consumer(stream.name, config)
        sub = await js.pull_subscribe_bind(consumer=name, stream=stream.name)
    try:
        last = 0
        while last < through:
            try:
                batch = await sub.fetch(batch=_FETCH, timeout=_FETCH_S)
            except (NatsTimeout, TimeoutError):  # nothing left (messages deleted or expired since the cut)?
                with transient("reading the turns stream for a rebuild"):
                    if (await js.consumer_info(stream.name, name)).num_pending == 0:
                        return
                continue
            found = []
            for msg in batch:
                last = msg.metadata.sequence.stream
                if last > through:
                    break
                found.append(parse(msg.subject, msg.data, last, msg.metadata.timestamp))
            yield found
    finally:
        with contextlib.suppress(NatsError):
            await sub.unsubscribe()
            await js.delete_consumer(stream.name, name)
