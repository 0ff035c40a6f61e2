"""Working-memory transitions: append, seal at N, flush by sequence, idle, complete; all pure functions."""
from datetime import UTC, datetime, timedelta

from shared.ingest.buffer import Buffer, append, complete, flush, seal_idle
from tests.conftest import make_turn

NOW = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def empty() -> Buffer:
    return Buffer(tenant_id="t", conversation_id="c1")


def fill(buffer: Buffer, ids: list[str], window: int = 4, start_seq: int = 1) -> Buffer:
    for offset, turn_id in enumerate(ids):
        buffer, _ = append(buffer, make_turn(turn_id, turn_id=turn_id), start_seq + offset, NOW,
                           window_turns=window, recent_turns=5)
    return buffer


def test_a_window_is_sealed_at_n_turns_in_stream_order() -> None:
    buffer = fill(empty(), ["a", "b", "c"])
    assert [b.turn.turn_id for b in buffer.open] == ["a", "b", "c"] and not buffer.sealed
    buffer = fill(buffer, ["d", "e"], start_seq=4)
    assert [w.turn_ids for w in buffer.sealed] == [["a", "b", "c", "d"]]
    assert [b.turn.turn_id for b in buffer.open] == ["e"]
    assert buffer.tail is not None and buffer.tail.turn_id == "d"


def test_the_next_window_quotes_the_last_turn_of_the_previous_one() -> None:
    buffer = fill(empty(), [f"t{i}" for i in range(8)])
    assert [w.turn_ids for w in buffer.sealed] == [["t0", "t1", "t2", "t3"], ["t4", "t5", "t6", "t7"]]
    assert buffer.sealed[0].context == [] and [t.turn_id for t in buffer.sealed[1].context] == ["t3"]


def test_repeated_turn_ids_are_ignored_even_after_their_window_closed() -> None:
    buffer = fill(empty(), ["a", "b", "c", "d"])
    buffer = complete(buffer, ["a", "b", "c", "d"])
    again, new = append(buffer, make_turn("a again", turn_id="a"), 99, NOW, window_turns=4, recent_turns=5)
    assert not new and again == buffer
    open_dup, new = append(fill(empty(), ["x"]), make_turn("x", turn_id="x"), 5, NOW, window_turns=4,
                           recent_turns=5)
    assert not new and len(open_dup.open) == 1


def test_flush_seals_only_what_was_published_before_it() -> None:
    buffer = fill(empty(), ["a", "b"], start_seq=10)
    buffer, _ = append(buffer, make_turn("late", turn_id="late"), 20, NOW, window_turns=4, recent_turns=5)
    flushed = flush(buffer, 15, NOW)
    assert [w.turn_ids for w in flushed.sealed] == [["a", "b"]] and flushed.sealed[0].reason == "flush"
    assert [b.turn.turn_id for b in flushed.open] == ["late"]
    # A turn published before the flush but applied after it is closed at once.
    straggler, new = append(flushed, make_turn("slow", turn_id="slow"), 12, NOW, window_turns=4, recent_turns=5)
    assert new and straggler.sealed[-1].turn_ids == ["slow"]
    assert flush(empty(), 3, NOW).sealed == []


def test_idle_conversations_are_sealed_after_the_timeout_only() -> None:
    buffer = fill(empty(), ["a"])
    assert seal_idle(buffer, NOW + timedelta(seconds=10), 30) == buffer
    sealed = seal_idle(buffer, NOW + timedelta(seconds=31), 30)
    assert [w.turn_ids for w in sealed.sealed] == [["a"]] and sealed.sealed[0].reason == "idle"
    assert seal_idle(empty(), NOW + timedelta(days=1), 30) == empty()


def test_complete_removes_exactly_that_window_and_recent_turns_are_bounded() -> None:
    buffer = fill(empty(), [f"t{i}" for i in range(8)])
    done = complete(buffer, ["t3", "t2", "t1", "t0"])
    assert [w.turn_ids for w in done.sealed] == [["t4", "t5", "t6", "t7"]]
    assert complete(done, ["nope"]) == done
    assert [t.turn_id for t in done.recent] == ["t3", "t4", "t5", "t6", "t7"]
