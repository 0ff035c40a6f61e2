"""Neighbour smoothing (recall._smooth): a hit gains a share of the score of the windows next to it in its
conversation, and of nothing further away."""
from datetime import UTC, datetime, timedelta

from shared.retrieval.recall import _smooth
from shared.settings import Settings
from shared.store import MemoryEntry, ScoredEntry

T0 = datetime(2024, 3, 1, 18, 0, tzinfo=UTC)


def hit(entry_id: str, score: float, after: timedelta, conversation: str = "c") -> ScoredEntry:
    when = T0 + after
    entry = MemoryEntry(id=entry_id, tenant_id="t", conversation_id=conversation, kind="episodic", text=entry_id,
                        occurred_at=when, created_at=T0, updated_at=T0, source_turn_ids=[entry_id])
    return ScoredEntry(entry=entry, score=score)


def test_the_window_next_to_a_strong_hit_gains_a_share_of_its_score_and_moves_up() -> None:
    """Two windows of one evening, a few minutes apart: the weaker gains the share of the stronger's score, which
    puts it above a hit of another session that scored a little more; `explain` says why."""
    strong = hit("strong", 0.5, timedelta(0))
    beside = hit("beside", 0.2, timedelta(minutes=4))
    elsewhere = hit("elsewhere", 0.25, timedelta(days=9))
    out, why = _smooth([strong, elsewhere, beside], 0.25)
    scores = {h.entry.id: h.score for h in out}
    assert [h.entry.id for h in out][:2] == ["strong", "beside"]
    assert abs(scores["beside"] - (0.2 + 0.25 * 0.5)) < 1e-9
    assert why["beside"] == ["the window next to it matched (+0.125)"]


def test_a_hit_of_another_session_or_conversation_is_no_neighbour() -> None:
    """The hit just before another in time, but days earlier, or a window of another conversation at the same
    instant, gives it nothing: only the windows next to it count (within hops.NEIGHBOUR)."""
    strong = hit("strong", 0.5, timedelta(0))
    days_later = hit("days later", 0.2, timedelta(days=3))
    other_chat = hit("other chat", 0.2, timedelta(minutes=1), conversation="d")
    out, why = _smooth([strong, days_later, other_chat], 0.25)
    assert {h.entry.id: h.score for h in out} == {"strong": 0.5, "days later": 0.2, "other chat": 0.2}
    assert why == {}


def test_smoothing_is_on_by_default() -> None:
    """The shipped setting gives a neighbour its share (0 would switch smoothing off)."""
    assert Settings().neighbor_weight > 0
