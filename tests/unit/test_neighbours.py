"""The windows beside a match (recall._smooth): an episode gains a share of the first-pass score of the windows next
to it in its user's conversation, and of nothing further away; what it gains is never counted when currency
measures which hits are about the same thing (currency.rerank's `lifts`)."""
from datetime import UTC, datetime, timedelta

from shared.retrieval.currency import Currency, rerank
from shared.retrieval.recall import _smooth
from shared.retrieval.tense import read
from shared.settings import Settings
from shared.store import MemoryEntry, ScoredEntry

T0 = datetime(2024, 3, 1, 18, 0, tzinfo=UTC)


def hit(entry_id: str, score: float, after: timedelta, conversation: str = "c", kind: str = "episodic",
        turns: int = 1, user: str = "u", text: str | None = None) -> ScoredEntry:
    when = T0 + after
    entry = MemoryEntry(id=entry_id, tenant_id="t", user_id=user, conversation_id=conversation,
                        kind=kind, text=text or entry_id,  # type: ignore[arg-type]
                        occurred_at=when, created_at=T0, updated_at=T0,
                        source_turn_ids=[f"{entry_id}-{i}" for i in range(turns)],
                        turn_times=[when + timedelta(minutes=i) for i in range(turns)])
    return ScoredEntry(entry=entry, score=score)


def first_pass(*hits: ScoredEntry) -> dict[str, float]:
    return {h.entry.id: h.score for h in hits}


def test_the_window_next_to_a_strong_hit_gains_a_share_of_its_score_and_moves_up() -> None:
    """Two windows of one evening, a few minutes apart, each gain a quarter of the other's score, which puts the
    weaker above a hit of another session that scored a little more; that one gains nothing, and `explain` names
    the window that gave."""
    strong = hit("strong", 0.5, timedelta(0))
    beside = hit("beside", 0.2, timedelta(minutes=4))
    elsewhere = hit("elsewhere", 0.25, timedelta(days=9))
    smoothed = _smooth([strong, elsewhere, beside], first_pass(strong, elsewhere, beside), 0.25)
    scores = {h.entry.id: h.score for h in smoothed.hits}
    assert [h.entry.id for h in smoothed.hits] == ["strong", "beside", "elsewhere"]
    assert scores == {"strong": 0.55, "beside": 0.325, "elsewhere": 0.25}
    assert smoothed.lifts == {"strong": 0.2 * 0.25, "beside": 0.125}
    assert smoothed.reasons["beside"] == ["the window next to it matched: strong (+0.125)"]


def test_a_hit_of_another_session_user_or_conversation_is_no_neighbour() -> None:
    """The hit just after another in time, but days later, a window of another conversation at the same instant,
    and one of another user's conversation of the same id (a tenant-wide recall) give it nothing."""
    strong = hit("strong", 0.5, timedelta(0))
    days_later = hit("days later", 0.2, timedelta(days=3))
    other_chat = hit("other chat", 0.2, timedelta(minutes=1), conversation="d")
    other_user = hit("other user", 0.2, timedelta(minutes=2), user="v")
    hits = [strong, days_later, other_chat, other_user]
    smoothed = _smooth(hits, first_pass(*hits), 0.25)
    assert {h.entry.id: h.score for h in smoothed.hits} == {h.entry.id: h.score for h in hits}
    assert smoothed.lifts == {} and smoothed.reasons == {}


def test_neighbours_are_counted_from_the_earlier_windows_last_turn() -> None:
    """A slow chat: a window of four turns ten minutes apart, and the next one 25 minutes after its last turn (55
    after its first) are neighbours; 31 minutes after its last turn they are not."""
    slow = hit("slow", 0.5, timedelta(0), turns=4)
    slow.entry.turn_times[:] = [T0 + timedelta(minutes=10 * i) for i in range(4)]
    close = hit("close", 0.1, timedelta(minutes=55))
    assert _smooth([slow, close], first_pass(slow, close), 0.25).lifts["close"] == 0.125
    far = hit("far", 0.1, timedelta(minutes=61))
    assert "far" not in _smooth([slow, far], first_pass(slow, far), 0.25).lifts


def test_facts_neither_give_nor_gain_and_only_the_first_pass_gives() -> None:
    """A fact a minute after a window gains nothing from it and gives it nothing; a window the follow or the second
    hop brought (not in the first pass) gains from the window beside it but gives nothing back, so the hit that
    brought it is not raised by itself."""
    window = hit("window", 0.5, timedelta(0))
    fact = hit("fact", 0.9, timedelta(minutes=1), kind="fact")
    brought = hit("brought", 0.25, timedelta(minutes=5))
    smoothed = _smooth([fact, window, brought], first_pass(fact, window), 0.25)
    assert smoothed.lifts == {"brought": 0.125}
    assert {h.entry.id: h.score for h in smoothed.hits} == {"fact": 0.9, "window": 0.5, "brought": 0.375}


def test_windows_raised_by_their_neighbours_never_push_newer_evidence_out_of_the_band_or_below_a_claim() -> None:
    """Asked where she lives now: two windows of an old chat about Vienna, minutes apart, a fact from them, and one
    newer window about Graz, less relevant but within the band. Raised by each other, the Vienna windows would set
    a bar the Graz window no longer reaches, and the fact would stand above it; measured without their lifts, Graz
    comes first and the fact below it, as with smoothing off."""
    old = [hit("vienna 1", 1.0, timedelta(0), text="Lena: we live in Vienna, near the Prater."),
           hit("vienna 2", 0.9, timedelta(minutes=4), text="Lena: Vienna has been home for years now.")]
    fact = hit("fact", 0.8, timedelta(minutes=1), kind="fact", text="Lena lives in Vienna")
    fact.entry.source_turn_ids[:] = ["vienna 1-0"]
    graz = hit("graz", 0.32, timedelta(days=200), conversation="e",
               text="Lena: we finally moved to Graz last month, the new flat is near the university and the river.")
    hits = [*old, fact, graz]
    shipped = Settings()
    currency = Currency(band=shipped.recency_band, weight=shipped.recency_weight)
    reading = read("Where does Lena live now?", "en")

    def order(weight: float) -> list[str]:
        smoothed = _smooth(hits, first_pass(*hits), weight)
        ranked, _ = rerank(smoothed.hits, reading, currency, engine_fused=False, lifts=smoothed.lifts)
        return [h.entry.id for h in ranked]

    assert order(0.0)[0] == "graz" and order(0.0).index("fact") > order(0.0).index("graz")
    assert order(0.25)[0] == "graz" and order(0.25).index("fact") > order(0.25).index("graz")


def test_smoothing_is_on_by_default() -> None:
    """The shipped setting gives a neighbour its share (0 would switch smoothing off)."""
    assert Settings().neighbor_weight > 0
