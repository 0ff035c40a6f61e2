"""Working-memory transitions: append, seal at N, flush by sequence, idle, complete; all pure functions."""
from datetime import UTC, datetime, timedelta

import pytest

from shared.errors import ConfigError
from shared.working_memory import buffer as buffers
from shared.working_memory.buffer import (
    SEEN_LIMIT,
    Buffer,
    append,
    check_fits,
    complete,
    flush,
    max_bytes,
    next_due,
    seal_idle,
    seen,
)

NOW = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def empty() -> Buffer:
    return Buffer(tenant_id="t", conversation_id="c1")


def fill(buffer: Buffer, ids: list[str], window: int = 4, start_seq: int = 1, recent: int = 5) -> Buffer:
    for offset, turn_id in enumerate(ids):
        buffer, _ = append(buffer, turn_id, start_seq + offset, NOW + timedelta(seconds=offset), NOW,
                           window_turns=window, recent_turns=recent)
    return buffer


def test_a_window_is_sealed_at_n_turns_in_stream_order() -> None:
    """Turns stay open until the window size is reached; then the first N seal as one window in sequence order and later
    turns stay open."""
    buffer = fill(empty(), ["a", "b", "c"])
    assert buffer.open == [1, 2, 3] and not buffer.sealed and buffer.active
    buffer = fill(buffer, ["d", "e"], start_seq=4)
    assert [w.seqs for w in buffer.sealed] == [[1, 2, 3, 4]]
    assert buffer.open == [5] and buffer.tail == 4


def test_the_next_window_quotes_the_last_turn_of_the_previous_one() -> None:
    """Each sealed window after the first carries the previous window's last turn as its context; the first window has
    none."""
    buffer = fill(empty(), [f"t{i}" for i in range(8)])
    assert [w.seqs for w in buffer.sealed] == [[1, 2, 3, 4], [5, 6, 7, 8]]
    assert buffer.sealed[0].context is None and buffer.sealed[1].context == 4


def test_repeated_turn_ids_are_ignored_even_after_their_window_closed() -> None:
    """A turn id already seen is not appended again, whether its window is still open or already completed and gone."""
    buffer = complete(fill(empty(), ["a", "b", "c", "d"]), [1, 2, 3, 4])
    assert seen(buffer, "a") and not buffer.active
    again, new = append(buffer, "a", 99, NOW, NOW, window_turns=4, recent_turns=5)
    assert not new and again == buffer
    open_dup, new = append(fill(empty(), ["x"]), "x", 5, NOW, NOW, window_turns=4, recent_turns=5)
    assert not new and open_dup.open == [1]


def test_seen_ids_are_fixed_size_digests_and_bounded() -> None:
    """The seen set holds 16-byte digests of at most SEEN_LIMIT turn ids, however long the ids, forgetting the oldest
    first."""
    buffer = fill(empty(), ["x" * 128 + str(i) for i in range(SEEN_LIMIT + 10)], window=64, recent=0)
    assert len(buffer.seen) == SEEN_LIMIT and {len(d) for d in buffer.seen} == {16}
    assert not seen(buffer, "x" * 128 + "0") and seen(buffer, "x" * 128 + str(SEEN_LIMIT + 9))


def test_flush_seals_only_what_was_published_before_it() -> None:
    """A flush seals only the open turns with sequences up to its own and leaves later ones open; a straggler from
    before the flush is sealed at once, and flushing an empty buffer seals nothing."""
    buffer = fill(empty(), ["a", "b"], start_seq=10)
    buffer, _ = append(buffer, "late", 20, NOW, NOW, window_turns=4, recent_turns=5)
    flushed = flush(buffer, 15, NOW)
    assert [w.seqs for w in flushed.sealed] == [[10, 11]] and flushed.sealed[0].reason == "flush"
    assert flushed.open == [20]
    # A turn published before the flush but applied after it is closed at once.
    straggler, new = append(flushed, "slow", 12, NOW, NOW, window_turns=4, recent_turns=5)
    assert new and straggler.sealed[-1].seqs == [12]
    assert flush(empty(), 3, NOW).sealed == []


def test_idle_conversations_are_sealed_after_the_timeout_only() -> None:
    """Open turns are sealed as an idle window only once the idle timeout has passed, and an empty buffer is left
    unchanged."""
    buffer = fill(empty(), ["a"])
    assert seal_idle(buffer, NOW + timedelta(seconds=10), 30) == buffer
    sealed = seal_idle(buffer, NOW + timedelta(seconds=31), 30)
    assert [w.seqs for w in sealed.sealed] == [[1]] and sealed.sealed[0].reason == "idle"
    assert seal_idle(empty(), NOW + timedelta(days=1), 30) == empty()


def test_complete_removes_exactly_that_window_and_recent_turns_are_bounded() -> None:
    """Completing a window removes exactly the window with those sequences (in any order) and ignores unknown ones,
    while the recent turns keep only the newest few."""
    buffer = fill(empty(), [f"t{i}" for i in range(8)])
    done = complete(buffer, [4, 3, 2, 1])
    assert [w.seqs for w in done.sealed] == [[5, 6, 7, 8]]
    assert complete(done, [99]) == done
    assert [r.seq for r in done.recent] == [4, 5, 6, 7, 8]


def test_referenced_turns_are_those_a_window_recall_or_context_still_needs() -> None:
    """A buffer references every turn still in a window, in the recent list, or quoted as the next window's context, and
    drops completed turns nothing else needs."""
    buffer = fill(empty(), [f"t{i}" for i in range(6)], recent=2)
    assert buffer.referenced() == {1, 2, 3, 4, 5, 6}  # sealed 1-4, open 5-6 (recent 5-6, tail 4)
    done = complete(buffer, [1, 2, 3, 4])
    assert done.referenced() == {4, 5, 6}  # 4 stays: the next window quotes it


def test_a_sweep_is_due_when_open_turns_go_idle_or_a_sealed_window_outlives_its_grace() -> None:
    """The next sweep is due at the idle timeout for open turns, at the grace period after a window was sealed, and
    never for a buffer with nothing pending."""
    buffer = fill(empty(), ["a", "b"])
    assert next_due(buffer, 300, 30) == NOW + timedelta(seconds=300)
    sealed = flush(buffer, 99, NOW + timedelta(seconds=5))
    assert next_due(sealed, 300, 30) == NOW + timedelta(seconds=35)
    assert next_due(complete(sealed, [1, 2]), 300, 30) is None


def test_a_buffer_is_bounded_by_the_settings_whatever_the_turns_say() -> None:
    """The byte bound derived from the settings is small for the defaults, settings whose buffer could outgrow a NATS
    message are refused naming ENGRAM_MAX_PENDING_WINDOWS, and a buffer of long CJK ids stays within the bound."""
    defaults = max_bytes(window_turns=4, recent_turns=20, max_pending_windows=32)
    assert defaults < 40_000
    check_fits(window_turns=4, recent_turns=20, max_pending_windows=32, max_payload=1024 * 1024)
    # Settings under which a buffer could outgrow a NATS message are refused at startup, saying what to change.
    with pytest.raises(ConfigError, match="ENGRAM_MAX_PENDING_WINDOWS"):
        check_fits(window_turns=64, recent_turns=500, max_pending_windows=1000, max_payload=1024 * 1024)
    # A real buffer never exceeds the bound (long CJK ids; the turns' texts are stored elsewhere).
    long_ids = [("我" * 40) + str(i) for i in range(200)]
    buffer = fill(empty(), long_ids, window=4, recent=20)
    assert len(buffer.model_dump_json()) <= defaults


def test_without_takes_turns_out_of_every_window_and_drops_the_empty_ones() -> None:
    """Removing turns takes them out of the open, sealed and recent lists, drops windows left empty, and clears a
    context or tail that pointed at a removed turn."""
    when = datetime(2024, 1, 1, tzinfo=UTC)
    b = buffers.Buffer(tenant_id="t", conversation_id="c", open=[7, 8],
                       sealed=[buffers.SealedWindow(seqs=[1, 2], context=None, sealed_at=when, reason="size"),
                               buffers.SealedWindow(seqs=[3, 4], context=2, sealed_at=when, reason="size")],
                       recent=[buffers.Recent(seq=s, ts=when) for s in (1, 2, 3, 4, 7, 8)], tail=4)
    after = buffers.without(b, {1, 2, 4, 8})
    assert after.open == [7] and [w.seqs for w in after.sealed] == [[3]] and after.sealed[0].context is None
    assert [r.seq for r in after.recent] == [3, 7] and after.tail is None
    assert after.referenced() == {3, 7}


def test_a_late_lower_sequence_takes_its_place_while_its_window_is_open_and_starts_the_next_once_sealed() -> None:
    """A turn that reaches working memory after a later one (another replica read it, or it was redelivered) is put
    in sequence order while its window is open, so the window holds consecutive turns; once a window has sealed
    without it, it goes into the next window: held once and never lost, but not in the window it belonged to."""
    buffer = fill(empty(), ["a", "b"])                      # seqs 1, 2
    buffer, _ = append(buffer, "d", 4, NOW, NOW, window_turns=4, recent_turns=5)
    buffer, new = append(buffer, "c", 3, NOW, NOW, window_turns=4, recent_turns=5)  # late, window still open
    assert new and [w.seqs for w in buffer.sealed] == [[1, 2, 3, 4]] and buffer.open == []

    buffer = fill(empty(), ["a", "b", "c"])                 # seqs 1, 2, 3
    buffer, _ = append(buffer, "e", 5, NOW, NOW, window_turns=4, recent_turns=5)    # seals 1, 2, 3, 5
    buffer, new = append(buffer, "d", 4, NOW, NOW, window_turns=4, recent_turns=5)  # too late for that window
    assert new and [w.seqs for w in buffer.sealed] == [[1, 2, 3, 5]] and buffer.open == [4]
    again, new = append(buffer, "d", 4, NOW, NOW, window_turns=4, recent_turns=5)   # and only once
    assert not new and again == buffer


def test_recent_turns_are_kept_in_ts_order_whatever_order_they_arrive_in() -> None:
    """A product's timestamps, not the stream's arrival order, order the recent turns (the stream order breaks
    ties)."""
    buffer = empty()
    for seq, minutes in [(1, 30), (2, 10), (3, 20), (4, 10)]:
        buffer, _ = append(buffer, f"t{seq}", seq, NOW + timedelta(minutes=minutes), NOW, window_turns=8,
                           recent_turns=3)
    assert [r.seq for r in buffer.recent] == [4, 3, 1]  # the newest three by ts, oldest first
