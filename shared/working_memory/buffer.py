"""A conversation's working-memory buffer and its pure state transitions (append, seal, flush, complete).

The buffer holds references only: each turn's stream sequence, never its text, which lives under its own key (see
buckets.py). So a buffer's size is bounded by the settings, whatever the turns say (`max_bytes`), and one
KV value per conversation can never outgrow the server's max_payload.

A window is *sealed* (its turns fixed) in the same compare-and-set write that decides to close it, so two replicas
can never close overlapping windows: whoever processes a sealed window writes the same deterministic entry.
"""
import hashlib
from datetime import datetime, timedelta, timezone
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from shared.errors import ConfigError

SealReason = Literal["size", "idle", "flush"]
SEEN_LIMIT = 1000      # recent turn ids remembered per conversation, to ignore redeliveries
_MAX_SEQ = 2 ** 63 - 1  # the largest stream sequence (its decimal digits are what a reference costs)


def digest(turn_id: str) -> str:
    """A short, fixed-size fingerprint of a turn id (ids may be 128 characters; 1,000 of them add up)."""
    return hashlib.blake2b(turn_id.encode(), digest_size=8).hexdigest()


class Recent(BaseModel):
    """A recent turn: where its text is, and when it was said (working memory shows the newest)."""

    model_config = ConfigDict(frozen=True)

    seq: int
    ts: AwareDatetime


class SealedWindow(BaseModel):
    """Turns whose window is closed and waiting to be written as entries."""

    model_config = ConfigDict(frozen=True)

    seqs: list[int]                   # the window's turns, in stream order
    context: int | None = None        # the turn before the window, quoted for context only
    sealed_at: AwareDatetime
    reason: SealReason


class Buffer(BaseModel):
    """Everything engram keeps about one conversation between windows."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    conversation_id: str
    open: list[int] = Field(default_factory=list)               # sequences of the turns of the open window
    sealed: list[SealedWindow] = Field(default_factory=list)
    seen: list[str] = Field(default_factory=list)               # digests of recent turn ids
    recent: list[Recent] = Field(default_factory=list)          # the last turns, for recall's working memory
    tail: int | None = None                                     # last turn of the last sealed window (context)
    last_turn_at: AwareDatetime | None = None                   # wall-clock time of the last append (idle detection)
    flushed_through: int = 0                                    # stream sequence of the latest flush applied

    @property
    def active(self) -> bool:
        """True while some turn waits in an open or a sealed window (the conversation is in the open index)."""
        return bool(self.open or self.sealed)

    def referenced(self) -> set[int]:
        """Sequences of every turn whose text must be kept: open, sealed, quoted as context, or recent."""
        refs = set(self.open) | {s for w in self.sealed for s in w.seqs} | {r.seq for r in self.recent}
        refs |= {w.context for w in self.sealed if w.context is not None}
        if self.tail is not None:
            refs.add(self.tail)
        return refs


def _seal(buffer: Buffer, seqs: list[int], reason: SealReason, now: datetime) -> Buffer:
    if not seqs:
        return buffer
    ordered = sorted(seqs)
    window = SealedWindow(seqs=ordered, context=buffer.tail, sealed_at=now, reason=reason)
    return buffer.model_copy(update={
        "open": [s for s in buffer.open if s not in set(seqs)],
        "sealed": [*buffer.sealed, window],
        "tail": ordered[-1],
    })


def seen(buffer: Buffer, turn_id: str) -> bool:
    """Whether this turn id was already appended (a redelivery or a repeated id)."""
    return digest(turn_id) in buffer.seen


def append(buffer: Buffer, turn_id: str, seq: int, ts: datetime, now: datetime, *, window_turns: int,
           recent_turns: int) -> tuple[Buffer, bool]:
    """Add a turn (its text is stored by the caller under `seq`); seal the oldest `window_turns` open turns once
    that many are open.

    Returns the new buffer and whether the turn was new (False: a redelivery or a repeated turn_id).
    A turn published before a flush that was already applied is sealed at once: the flush closed its window.
    """
    if seen(buffer, turn_id) or seq in buffer.open:
        return buffer, False
    recent = sorted([*buffer.recent, Recent(seq=seq, ts=ts)], key=lambda r: (r.ts, r.seq))[-recent_turns:] \
        if recent_turns else []
    buffer = buffer.model_copy(update={
        "open": [*buffer.open, seq],
        "seen": [*buffer.seen, digest(turn_id)][-SEEN_LIMIT:],
        "recent": recent,
        "last_turn_at": now,
    })
    if seq < buffer.flushed_through:
        return _seal(buffer, [seq], "flush", now), True
    if len(buffer.open) >= window_turns:
        buffer = _seal(buffer, sorted(buffer.open)[:window_turns], "size", now)
    return buffer, True


def flush(buffer: Buffer, seq: int, now: datetime) -> Buffer:
    """Seal every open turn published before the flush (stream sequence below `seq`)."""
    before = [s for s in buffer.open if s < seq]
    buffer = buffer.model_copy(update={"flushed_through": max(buffer.flushed_through, seq)})
    return _seal(buffer, before, "flush", now)


def seal_idle(buffer: Buffer, now: datetime, idle_timeout_s: float) -> Buffer:
    """Seal all open turns if nothing was appended for `idle_timeout_s`."""
    if not buffer.open or buffer.last_turn_at is None:
        return buffer
    if (now - buffer.last_turn_at).total_seconds() < idle_timeout_s:
        return buffer
    return _seal(buffer, list(buffer.open), "idle", now)


def complete(buffer: Buffer, seqs: list[int]) -> Buffer:
    """Drop the sealed window made of exactly these turns (its entries are stored)."""
    wanted = sorted(seqs)
    return buffer.model_copy(update={"sealed": [w for w in buffer.sealed if w.seqs != wanted]})


def without(buffer: Buffer, seqs: set[int]) -> Buffer:
    """The buffer with these turns taken out of every window, of the context quoted and of the recent turns
    (Forget): a window left empty is dropped; the others are written from the turns that remain."""
    sealed = [w.model_copy(update={"seqs": [s for s in w.seqs if s not in seqs],
                                   "context": None if w.context in seqs else w.context}) for w in buffer.sealed]
    return buffer.model_copy(update={
        "open": [s for s in buffer.open if s not in seqs], "sealed": [w for w in sealed if w.seqs],
        "recent": [r for r in buffer.recent if r.seq not in seqs],
        "tail": None if buffer.tail in seqs else buffer.tail})


def next_due(buffer: Buffer, idle_timeout_s: float, seal_grace_s: float) -> datetime | None:
    """When a sweep should look at this buffer again: its open turns go idle, or its oldest sealed window's
    grace period ends (then any replica writes it). None when nothing waits."""
    times = []
    if buffer.open and buffer.last_turn_at is not None:
        times.append(buffer.last_turn_at + timedelta(seconds=idle_timeout_s))
    if buffer.sealed:
        times.append(min(w.sealed_at for w in buffer.sealed) + timedelta(seconds=seal_grace_s))
    return min(times) if times else None


def max_bytes(*, window_turns: int, recent_turns: int, max_pending_windows: int) -> int:
    """The largest a buffer can grow under these settings, as stored (JSON): the bound checked at startup."""
    # The longest a timestamp gets in JSON: microseconds and an offset ("…12:34:56.123456-12:45").
    when = datetime(2000, 1, 1, 12, 34, 56, 123456, tzinfo=timezone(-timedelta(hours=12, minutes=45)))
    seqs = [_MAX_SEQ] * window_turns
    worst = Buffer(
        tenant_id="t" * 64, conversation_id="c" * 128, open=seqs[:-1] if window_turns > 1 else [],
        sealed=[SealedWindow(seqs=seqs, context=_MAX_SEQ, sealed_at=when, reason="flush")] * (max_pending_windows + 1),
        seen=[digest(str(i)) for i in range(SEEN_LIMIT)], recent=[Recent(seq=_MAX_SEQ, ts=when)] * recent_turns,
        tail=_MAX_SEQ, last_turn_at=when, flushed_through=_MAX_SEQ)
    return len(worst.model_dump_json())


def check_fits(*, window_turns: int, recent_turns: int, max_pending_windows: int, max_payload: int) -> None:
    """Refuse settings under which a buffer could outgrow what the NATS server accepts in one message."""
    largest = max_bytes(window_turns=window_turns, recent_turns=recent_turns, max_pending_windows=max_pending_windows)
    if largest > max_payload:
        raise ConfigError(f"a conversation's buffer can reach {largest:,} bytes with these settings, over the NATS "
                          f"server's max_payload of {max_payload:,}; lower ENGRAM_MAX_PENDING_WINDOWS or "
                          "ENGRAM_WINDOW_TURNS, or raise the server's max_payload")
