"""The windows beside a match (recall._smooth): an episode gains a share of the first-pass score of the windows next
to it in its conversation, and of nothing further away; what it gains is never counted when currency
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


def test_a_hit_of_another_session_or_conversation_is_no_neighbour() -> None:
    """The hit just after another in time, but days later, and a window of another conversation at the same instant
    give it nothing."""
    strong = hit("strong", 0.5, timedelta(0))
    days_later = hit("days later", 0.2, timedelta(days=3))
    other_chat = hit("other chat", 0.2, timedelta(minutes=1), conversation="d")
    hits = [strong, days_later, other_chat]
    smoothed = _smooth(hits, first_pass(*hits), 0.25)
    assert {h.entry.id: h.score for h in smoothed.hits} == {h.entry.id: h.score for h in hits}
    assert smoothed.lifts == {} and smoothed.reasons == {}


def test_in_a_group_chat_the_next_window_is_a_neighbour_whoever_spoke_first_in_it() -> None:
    """A conversation is one chat however many people speak in it (its id is the tenant's): Bo's window two minutes
    after Ana's is its neighbour."""
    ana = hit("ana", 0.5, timedelta(0), user="ana")
    bo = hit("bo", 0.1, timedelta(minutes=2), user="bo")
    assert _smooth([ana, bo], first_pass(ana, bo), 0.25).lifts == {"ana": 0.025, "bo": 0.125}


def test_an_answer_the_follow_brought_gains_nothing_more_from_its_asking_window() -> None:
    """The follow gave the answer its share of the asking window already (hops.raise_answers): it gains nothing
    more here, and, not found by the query, gives nothing back."""
    asking = hit("asking", 0.4, timedelta(0))
    answer = hit("answer", 0.2, timedelta(minutes=3))
    smoothed = _smooth([asking, answer], first_pass(asking), 0.25, answers={"answer"})
    assert smoothed.lifts == {}


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


def the_move_to_graz(*also: ScoredEntry, graz_score: float = 0.32) -> list[ScoredEntry]:
    """Two windows of an old chat about Vienna, minutes apart, a fact from the first, and one newer, less relevant
    window about Graz (of another conversation), and `also`."""
    old = [hit("vienna 1", 1.0, timedelta(0), text="Lena: we live in Vienna, in a flat near the Prater with a view "
                                                     "of the big wheel from the kitchen window."),
           hit("vienna 2", 0.9, timedelta(minutes=4), text="Lena: Vienna has been home for years now, the trams and "
                                                            "the coffee houses make living there easy.")]
    fact = hit("fact", 0.8, timedelta(minutes=1), kind="fact", text="Lena lives in Vienna")
    fact.entry.source_turn_ids[:] = ["vienna 1-0"]
    graz = hit("graz", graz_score, timedelta(days=200), conversation="e",
               text="Lena: we finally moved to Graz last month, the new flat is near the university and the river.")
    return [*old, fact, *also, graz]


def now_order(hits: list[ScoredEntry], weight: float, k: int | None = None, engine_fused: bool = False,
              question: str = "Where does Lena live now?", cut: bool = True) -> list[str]:
    """The ids as recall orders them for `question`: smoothed, then ordered for its time, the first `k` reordered
    and (`cut`) kept."""
    shipped = Settings()
    currency = Currency(band=shipped.recency_band, weight=shipped.recency_weight)
    smoothed = _smooth(sorted(hits, key=lambda h: h.score, reverse=True), first_pass(*hits), weight)
    ranked, _ = rerank(smoothed.hits, read(question, "en"), currency, k,
                       engine_fused=engine_fused, lifts=smoothed.lifts)
    return [h.entry.id for h in ranked][:k if cut else None]


def test_windows_raised_by_their_neighbours_never_push_newer_evidence_out_of_the_band_or_below_a_claim() -> None:
    """Raised by each other, the Vienna windows would set a bar the Graz window no longer reaches, and the fact
    would stand above it; measured without their lifts, Graz comes first and the fact below it, as with smoothing
    off."""
    for weight in (0.0, 0.25):
        order = now_order(the_move_to_graz(), weight)
        assert order[0] == "graz" and order.index("fact") > order.index("graz"), (weight, order)


def test_windows_raised_into_the_first_k_never_keep_newer_evidence_out_of_them_while_a_claim_is_there() -> None:
    """A third Vienna window, raised by the second past the Graz window, would take the last of four places and
    leave the fact there with no newer evidence to yield to; the Graz window trades places too, comes first, and
    the fact stays below it."""
    third = hit("vienna 3", 0.31, timedelta(minutes=8), text="Lena: the Vienna flat is small, but we like the tram "
                                                              "stop outside and the market on Saturdays.")
    for weight in (0.0, 0.25):
        order = now_order(the_move_to_graz(third), weight, k=4)
        assert order[0] == "graz" and "fact" in order and order.index("fact") > order.index("graz"), (weight, order)


def test_under_a_budget_a_claim_pushed_out_of_the_first_k_with_the_newer_evidence_stays_below_it() -> None:
    """A recall by budget reorders its first ten and packs past them: four windows of the old chat raised by one
    another fill the first four, pushing out both the fact and the newer Graz window; the fact must still come
    after Graz in all that is returned, as with smoothing off."""
    run = [hit(f"vienna {c}", score, timedelta(minutes=4 * i),
               text=f"Lena: Vienna part {c}, the flat near the Prater, the trams and the coffee houses we love.")
           for i, (c, score) in enumerate(zip("abcd", (1.0, 0.42, 0.42, 0.42), strict=True))]
    fact = hit("fact", 0.5, timedelta(minutes=1), kind="fact", text="Lena lives in Vienna")
    fact.entry.source_turn_ids[:] = ["vienna a-0"]
    graz = hit("graz", 0.45, timedelta(days=200), conversation="e",
               text="Lena: we finally moved to Graz last month, the new flat is near the university and the river.")
    for weight in (0.0, 0.25):
        order = now_order([*run, fact, graz], weight, k=4, cut=False)
        assert order.index("fact") > order.index("graz"), (weight, order)


def test_for_a_past_event_the_lifts_only_order_the_hits() -> None:
    """Asked when Lena moved to Vienna (a past event: no claim yields to newer evidence), the first k are the lifted
    ones and the fact keeps its place among them."""
    assert "fact" in now_order(the_move_to_graz(), 0.25, k=3, question="When did Lena move to Vienna?")


def test_the_band_counts_the_engines_ranks_without_the_lifts() -> None:
    """With the engine's ranks (the fast path, `among_own_kind`: the Graz window ranks third among episodes, so its
    relevance is 0.28 x 7/6 of the best's), the lifts are taken off too: the same order as with smoothing off."""
    hits = [h.model_copy(update={"dense_rank": rank, "sparse_rank": rank})
            for rank, h in enumerate(the_move_to_graz(graz_score=0.28), start=1)]
    assert now_order(hits, 0.25, engine_fused=True)[0] == "graz"
    assert now_order(hits, 0.25, engine_fused=True) == now_order(hits, 0.0, engine_fused=True)


def test_smoothing_is_on_by_default() -> None:
    """The shipped setting gives a neighbour its share (0 would switch smoothing off)."""
    assert Settings().neighbor_weight > 0
