"""Accepting turns and flushes into working memory (the ingestor's domain functions, no broker in sight)."""
from datetime import UTC, datetime

from shared.contract import Flush, Turn, check_tenant
from shared.errors import InvalidRequest, Unavailable
from shared.ingest import buffer as buffers
from shared.ingest.buffer import Buffer
from shared.ingest.policy import WindowPolicy
from shared.ingest.working_memory import WorkingMemory
from shared.runtime import metrics


async def accept_turn(wm: WorkingMemory, *, tenant: str, turn: Turn, seq: int, policy: WindowPolicy,
                      now: datetime | None = None) -> tuple[Buffer, bool]:
    """Append a turn to its conversation's buffer (sealing a window at N turns). Returns (buffer, was_new)."""
    check_tenant(turn, tenant)
    when = now or datetime.now(UTC)

    def change(current: Buffer) -> tuple[Buffer, tuple[bool, int]]:
        if len(current.sealed) >= policy.max_pending_windows:
            # Writing is failing or far behind: leave the turn in the stream and let it come back later.
            raise Unavailable(f"conversation {turn.conversation_id!r} has {len(current.sealed)} windows "
                              f"waiting to be written; retrying turn {turn.turn_id!r} later")
        after, new = buffers.append(current, turn, seq, when, window_turns=policy.window_turns,
                                    recent_turns=policy.recent_turns)
        return after, (new, len(after.sealed) - len(current.sealed))

    after, (new, sealed_now) = await wm.update(tenant, turn.conversation_id, change)
    metrics.turns_total.labels("accepted" if new else "duplicate").inc()
    if sealed_now > 0:
        metrics.windows_sealed_total.labels("size" if new and seq >= after.flushed_through else "flush").inc(
            sealed_now)
    return after, new


async def accept_flush(wm: WorkingMemory, *, tenant: str, flush: Flush, seq: int,
                       now: datetime | None = None) -> Buffer:
    """Seal every open turn of the conversation published before this flush."""
    check_tenant(flush, tenant)
    when = now or datetime.now(UTC)
    def change(current: Buffer) -> tuple[Buffer, int]:
        after = buffers.flush(current, seq, when)
        return after, len(after.sealed) - len(current.sealed)

    after, sealed_now = await wm.update(tenant, flush.conversation_id, change)
    metrics.flushes_total.inc()
    if sealed_now > 0:
        metrics.windows_sealed_total.labels("flush").inc(sealed_now)
    return after


async def accept(wm: WorkingMemory, *, tenant: str, kind: str, body: bytes, seq: int,
                 policy: WindowPolicy) -> Buffer:
    """Route one message of the turns stream (`turns` or `flush`) into working memory."""
    if kind == "turns":
        buffer, _ = await accept_turn(wm, tenant=tenant, turn=Turn.model_validate_json(body), seq=seq, policy=policy)
        return buffer
    if kind == "flush":
        return await accept_flush(wm, tenant=tenant, flush=Flush.model_validate_json(body), seq=seq)
    raise InvalidRequest(f"subject kind {kind!r} is neither 'turns' nor 'flush'")
