"""A conversation's working-memory buffer and its pure state transitions (append, seal, complete).

A window is *sealed* (its turns fixed) in the same compare-and-set write that decides to close it, so two replicas
can never close overlapping windows: whoever processes a sealed window writes the same deterministic entry.
"""
from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from shared.contract import Turn

SealReason = Literal["size", "idle", "flush"]


class BufferedTurn(BaseModel):
    """A turn with its stream sequence (the order it was published in)."""

    model_config = ConfigDict(frozen=True)

    seq: int
    turn: Turn


class SealedWindow(BaseModel):
    """Turns whose window is closed and waiting to be written as entries."""

    model_config = ConfigDict(frozen=True)

    turns: list[BufferedTurn]
    context: list[Turn] = Field(default_factory=list)
    sealed_at: AwareDatetime
    reason: SealReason

    @property
    def turn_ids(self) -> list[str]:
        """Ids of the turns in this window."""
        return [b.turn.turn_id for b in self.turns]


class Buffer(BaseModel):
    """Everything engram keeps about one conversation between windows."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    conversation_id: str
    open: list[BufferedTurn] = Field(default_factory=list)
    sealed: list[SealedWindow] = Field(default_factory=list)
    seen: list[str] = Field(default_factory=list)        # recent turn ids, to ignore redeliveries
    recent: list[Turn] = Field(default_factory=list)      # the last turns, for recall's working memory
    tail: Turn | None = None                              # last turn of the last sealed window (context)
    last_turn_at: AwareDatetime | None = None             # wall-clock time of the last append (idle detection)
    flushed_through: int = 0                              # stream sequence of the latest flush applied

    @property
    def is_idle_candidate(self) -> bool:
        """True when there are open turns an idle timeout could close."""
        return bool(self.open)


def _seal(buffer: Buffer, turns: list[BufferedTurn], reason: SealReason, now: datetime) -> Buffer:
    if not turns:
        return buffer
    ordered = sorted(turns, key=lambda b: b.seq)
    window = SealedWindow(turns=ordered, context=[buffer.tail] if buffer.tail else [], sealed_at=now, reason=reason)
    keep = {id(b) for b in turns}
    return buffer.model_copy(update={
        "open": [b for b in buffer.open if id(b) not in keep],
        "sealed": [*buffer.sealed, window],
        "tail": ordered[-1].turn,
    })


def append(buffer: Buffer, turn: Turn, seq: int, now: datetime, *, window_turns: int, recent_turns: int,
           seen_limit: int = 1000) -> tuple[Buffer, bool]:
    """Add a turn; seal the oldest `window_turns` open turns once that many are open.

    Returns the new buffer and whether the turn was new (False: a redelivery or a repeated turn_id).
    A turn published before a flush that was already applied is sealed at once: the flush closed its window.
    """
    if turn.turn_id in buffer.seen or any(b.turn.turn_id == turn.turn_id for b in buffer.open):
        return buffer, False
    item = BufferedTurn(seq=seq, turn=turn)
    buffer = buffer.model_copy(update={
        "open": [*buffer.open, item],
        "seen": [*buffer.seen, turn.turn_id][-seen_limit:],
        "recent": sorted([*buffer.recent, turn], key=lambda t: t.ts)[-recent_turns:] if recent_turns else [],
        "last_turn_at": now,
    })
    if seq < buffer.flushed_through:
        return _seal(buffer, [item], "flush", now), True
    if len(buffer.open) >= window_turns:
        oldest = sorted(buffer.open, key=lambda b: b.seq)[:window_turns]
        buffer = _seal(buffer, oldest, "size", now)
    return buffer, True


def flush(buffer: Buffer, seq: int, now: datetime) -> Buffer:
    """Seal every open turn published before the flush (stream sequence below `seq`)."""
    before = [b for b in buffer.open if b.seq < seq]
    buffer = buffer.model_copy(update={"flushed_through": max(buffer.flushed_through, seq)})
    return _seal(buffer, before, "flush", now)


def seal_idle(buffer: Buffer, now: datetime, idle_timeout_s: float) -> Buffer:
    """Seal all open turns if nothing was appended for `idle_timeout_s`."""
    if not buffer.open or buffer.last_turn_at is None:
        return buffer
    if (now - buffer.last_turn_at).total_seconds() < idle_timeout_s:
        return buffer
    return _seal(buffer, list(buffer.open), "idle", now)


def complete(buffer: Buffer, turn_ids: list[str]) -> Buffer:
    """Drop the sealed window made of exactly these turns (its entries are stored)."""
    wanted = sorted(turn_ids)
    return buffer.model_copy(update={"sealed": [w for w in buffer.sealed if sorted(w.turn_ids) != wanted]})
