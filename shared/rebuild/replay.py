"""The turns the stream retains, read again in stream order and cut into windows the way the ingestor would.

The same pure buffer transitions as the ingestor (shared/ingest/buffer.py) decide the windows: a window closes at
`window_turns` turns, at a flush, or when the conversation was idle for `idle_timeout_s` by the stream's own
timestamps. Turns still waiting in working memory are left out: the running ingestor writes them.
"""
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pydantic import ValidationError

from shared.compress import Window
from shared.contract import Flush, Turn, check_tenant
from shared.errors import InvalidRequest
from shared.ingest import buffer as buffers
from shared.ingest.buffer import Buffer
from shared.ingest.working_memory import WorkingMemory
from shared.messaging import streams, subjects
from shared.messaging.connection import transient

log = logging.getLogger("engram.rebuild")
_FETCH, _FETCH_S, _IDLE_S = 256, 5.0, 120.0


@dataclass
class Replay:
    """Windows cut from the stream, and what was read to cut them."""

    window_turns: int
    idle_timeout_s: float
    excluded: set[int]                                  # stream sequences waiting in working memory
    turns_replayed: int = 0
    turns_left_to_live: int = 0
    unreadable: int = 0
    covered: set[tuple[str, str, str]] = field(default_factory=set)  # (tenant, conversation, turn id) replayed
    _buffers: dict[tuple[str, str], Buffer] = field(default_factory=dict)
    _texts: dict[tuple[str, str], dict[int, Turn]] = field(default_factory=dict)

    def turn(self, tenant: str, turn: Turn, seq: int, at: datetime) -> list[Window]:
        """Append one turn; the windows it closed."""
        if seq in self.excluded:
            self.turns_left_to_live += 1
            return []
        key = (tenant, turn.conversation_id)
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

    def flush(self, tenant: str, flush: Flush, seq: int, at: datetime) -> list[Window]:
        """Apply a flush; the windows it closed."""
        key = (tenant, flush.conversation_id)
        if key not in self._buffers:
            return []
        self._buffers[key] = buffers.flush(self._buffers[key], seq, at)
        return self._drain(key)

    def rest(self) -> list[Window]:
        """Close every window still open: the live ingestor closed these turns' windows already (or they would
        have been left out)."""
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


async def waiting_in_working_memory(wm: WorkingMemory) -> set[int]:
    """Stream sequences of every turn waiting in an open or a sealed window of working memory."""
    waiting: set[int] = set()
    for tenant, conversation_id in await wm.conversations():
        buffer = await wm.get(tenant, conversation_id)
        if buffer is not None:
            waiting.update(buffer.open)
            waiting.update(s for w in buffer.sealed for s in w.seqs)
    return waiting


async def read(replay: Replay, js: JetStreamContext, prefix: str, through: int) -> AsyncIterator[list[Window]]:
    """Feed the stream's turns and flushes up to sequence `through` into `replay`; yields the windows as they
    close (then the ones still open at the end)."""
    stream = streams.turns_stream(prefix)
    name = f"engram-rebuild-{uuid.uuid4().hex}"
    config = ConsumerConfig(name=name, filter_subjects=streams.turns_subjects(prefix),
                            deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE, mem_storage=True,
                            inactive_threshold=_IDLE_S)
    with transient("reading the turns stream for a rebuild"):
        pending = (await js.add_consumer(stream, config)).num_pending
        sub = await js.pull_subscribe_bind(consumer=name, stream=stream)
    try:
        while pending:
            with transient("reading the turns stream for a rebuild"):
                batch = await sub.fetch(batch=min(pending, _FETCH), timeout=_FETCH_S)
            closed: list[Window] = []
            for msg in batch:
                pending = msg.metadata.num_pending
                seq = msg.metadata.sequence.stream
                if seq > through:
                    pending = 0
                    break
                closed += _apply(replay, msg.subject, msg.data, seq, msg.metadata.timestamp)
            if closed:
                yield closed
        yield replay.rest()
    finally:
        with contextlib.suppress(NatsError):
            await sub.unsubscribe()
            await js.delete_consumer(stream, name)


def _apply(replay: Replay, subject: str, data: bytes, seq: int, at: datetime) -> list[Window]:
    tenant, kind = subjects.parse(subject)
    try:
        if kind == "turns":
            turn = Turn.model_validate_json(data)
            check_tenant(turn, tenant)
            return replay.turn(tenant, turn, seq, at)
        if kind == "flush":
            flush = Flush.model_validate_json(data)
            check_tenant(flush, tenant)
            return replay.flush(tenant, flush, seq, at)
    except (ValidationError, InvalidRequest):
        pass
    replay.unreadable += 1
    return []
