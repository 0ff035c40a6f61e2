"""Accepting turns and flushes into working memory (the ingestor's domain functions, no broker in sight)."""
from datetime import UTC, datetime

from engram_client.contract import Flush, Turn, check_tenant
from engram_client.errors import InvalidRequest
from shared.errors import Busy
from shared.ingest.closer import WindowCloser
from shared.ingest.policy import WindowPolicy
from shared.runtime import metrics
from shared.working_memory import WorkingMemory
from shared.working_memory import buffer as buffers
from shared.working_memory.buffer import Buffer


def _busy(buffer: Buffer | None, turn: Turn, policy: WindowPolicy) -> Busy | None:
    if buffer is not None and len(buffer.sealed) >= policy.max_pending_windows:
        # Writing is failing or far behind: leave the turn in the stream and let it come back later.
        return Busy(f"conversation {turn.conversation_id!r} has {len(buffer.sealed)} windows waiting to be "
                    f"written; turn {turn.turn_id!r} waits in the stream")
    return None


async def accept_turn(wm: WorkingMemory, *, tenant: str, turn: Turn, seq: int, policy: WindowPolicy,
                      now: datetime | None = None) -> Buffer | None:
    """Store a turn's text, then append it to its conversation's buffer (sealing a window at N turns).

    A repeated turn id changes nothing, nor does a turn its user's or conversation's forget covers (see
    forgotten.py); a conversation that becomes active is marked in the open index.

    Raises:
        Busy: the conversation already has `max_pending_windows` windows waiting to be written.
    """
    check_tenant(turn, tenant)
    when = now or datetime.now(UTC)
    conversation_id = turn.conversation_id
    current = await wm.get(tenant, conversation_id)
    if current is not None and buffers.seen(current, turn.turn_id):
        metrics.turns_total.labels("duplicate").inc()
        if current.active:  # a redelivery after a crash between the buffer write and the mark
            await wm.index.mark(tenant, conversation_id, when)
        return current
    if seq <= await wm.forgotten.through(tenant, conversation_id, turn.user_id):
        # Fetched before a forget of its user or conversation erased it from the stream: it stays forgotten.
        metrics.turns_total.labels("forgotten").inc()
        return current
    if (busy := _busy(current, turn, policy)) is not None:
        raise busy
    await wm.put_turn(tenant, turn, seq)  # before any buffer refers to it

    def change(before: Buffer | None) -> tuple[Buffer, tuple[bool, int, bool]]:
        base = before or Buffer(tenant_id=tenant, conversation_id=conversation_id)
        if buffers.seen(base, turn.turn_id):  # appended meanwhile (a redelivery handled by another replica)
            return base, (False, 0, base.active)
        if (busy := _busy(before, turn, policy)) is not None:
            raise busy
        after, new = buffers.append(base, turn.turn_id, seq, turn.ts, when, window_turns=policy.window_turns,
                                    recent_turns=policy.recent_turns)
        return after, (new, len(after.sealed) - len(base.sealed), base.active)

    try:
        after, (new, sealed_now, was_active) = await wm.update(tenant, conversation_id, change)
    except Busy:
        latest = await wm.get(tenant, conversation_id)
        if latest is None or seq not in latest.referenced():  # stored for nothing: no buffer refers to it
            await wm.forget_turns(tenant, conversation_id, [seq])
        raise
    assert after is not None  # an append always writes or finds a buffer
    if not new:  # the same turn id was appended by another replica meanwhile
        metrics.turns_total.labels("duplicate").inc()
        if seq not in after.referenced():
            await wm.forget_turns(tenant, conversation_id, [seq])
        return after
    if seq <= await wm.forgotten.through(tenant, conversation_id, turn.user_id):
        # A forget of its user or conversation marked it while it was being appended; the forget may have emptied
        # working memory before the append landed, so the turn takes itself out (the mark is written before the
        # forget empties anything: whichever of the two reads second sees the other's write).
        metrics.turns_total.labels("forgotten").inc()
        return await wm.forget_turns_of(tenant, conversation_id, {seq})
    metrics.turns_total.labels("accepted").inc()
    if after.active and not was_active:
        await wm.index.mark(tenant, conversation_id, when)
    if sealed_now > 0:
        metrics.windows_sealed_total.labels("size" if seq >= after.flushed_through else "flush").inc(sealed_now)
    return after


async def accept_flush(wm: WorkingMemory, *, tenant: str, flush: Flush, seq: int,
                       now: datetime | None = None) -> Buffer | None:
    """Seal every open turn of the conversation published before this flush; a flush for a conversation engram
    holds nothing of stores nothing."""
    check_tenant(flush, tenant)
    when = now or datetime.now(UTC)

    def change(before: Buffer | None) -> tuple[Buffer | None, int]:
        if before is None:
            return None, 0
        after = buffers.flush(before, seq, when)
        return after, len(after.sealed) - len(before.sealed)

    after, sealed_now = await wm.update(tenant, flush.conversation_id, change)
    metrics.flushes_total.inc()
    if sealed_now > 0:
        metrics.windows_sealed_total.labels("flush").inc(sealed_now)
    return after


async def accept(wm: WorkingMemory, *, tenant: str, kind: str, body: bytes, seq: int,
                 policy: WindowPolicy) -> Buffer | None:
    """Route one message of the turns stream (`turns` or `flush`) into working memory."""
    if kind == "turns":
        return await accept_turn(wm, tenant=tenant, turn=Turn.model_validate_json(body), seq=seq, policy=policy)
    if kind == "flush":
        return await accept_flush(wm, tenant=tenant, flush=Flush.model_validate_json(body), seq=seq)
    raise InvalidRequest(f"subject kind {kind!r} is neither 'turns' nor 'flush'")


async def receive(closer: WindowCloser, *, tenant: str, kind: str, body: bytes, seq: int,
                  policy: WindowPolicy) -> None:
    """Accept one message of the turns stream into the closer's working memory, and hand the windows it sealed
    to that closer (this replica's), which writes them at once."""
    buffer = await accept(closer.wm, tenant=tenant, kind=kind, body=body, seq=seq, policy=policy)
    if buffer is None:
        return
    closer.marks.accepted(tenant, buffer.conversation_id, seq, [w.seqs for w in buffer.sealed])  # traces
    if buffer.sealed:
        closer.notify(tenant, buffer.conversation_id)
