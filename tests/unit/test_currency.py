"""Current by default: the time a question asks about, the band of hits about the same thing, newer evidence first
for the present, older for an earlier state, and derived claims below newer evidence."""
from datetime import UTC, datetime, timedelta

import pytest

from engram_client.contract import EntryKind
from shared.consolidation import outdated
from shared.evidence import figures
from shared.retrieval.currency import Currency, among_own_kind, rerank
from shared.retrieval.tense import read, topic
from shared.store import MemoryEntry, ScoredEntry

MARCH = datetime(2024, 3, 2, 10, 0, tzinfo=UTC)
CURRENCY = Currency(band=0.5, weight=0.8)
NO_TENSE_GAIN = Currency(band=0.5, weight=0.8, tense_weight=0.0)  # ENGRAM_RECENCY_TENSE_WEIGHT=0


@pytest.mark.parametrize(("query", "lang", "orientation"), [
    ("Where does Lena live?", "en", "present"),
    ("Where does Lena live now?", "en", "present"),
    ("What's the p95 latency of the checkout service?", "en", "present"),
    ("How many beta testers are there?", "en", "present"),
    ("What is my current rent?", "en", "present"),
    ("How old is Lena?", "en", "present"),
    ("Lena's favourite band?", "en", "present"),
    ("Where am I going on holiday this summer?", "en", "present"),
    ("Where did Lena live before?", "en", "earlier"),
    ("What was the latency before the fix?", "en", "earlier"),
    ("Which band did she used to like?", "en", "earlier"),
    ("What was her previous job?", "en", "earlier"),
    ("When did she move?", "en", "event"),
    ("What did Caroline research?", "en", "event"),
    ("小王现在在哪儿上班？", "zh", "present"),
    ("小王在哪儿上班？", "zh", "present"),
    ("小王之前在哪上班？", "zh", "earlier"),
    ("修复以前延迟是多少？", "zh", "earlier"),
    ("小王什么时候搬的家？", "zh", "event"),
])
def test_the_question_says_which_time_it_asks_about(query: str, lang: str, orientation: str) -> None:
    """Grammar and time words, not topics, decide whether a question is about now, an earlier state or an event."""
    assert read(query, lang).orientation == orientation


@pytest.mark.parametrize(("query", "words"), [
    ("林晓雯现在住在哪个城市？", "林晓雯 住在哪个城市？"),
    ("小王之前在哪上班？", "小王 在哪上班？"),
    ("What is my current job?", "What is my   job?"),
    ("Who is my ex?", "Who is my ex?"),
    ("现在？", "现在？"),
])
def test_the_search_terms_leave_out_words_for_when(query: str, words: str) -> None:
    """Time words are not searched for ("现在" is no Chinese stopword and matches any window saying "now"); words
    for earlier that also name the topic ("ex") stay, and a query of nothing but a time word is kept whole."""
    assert topic(query) == words


def hit(name: str, score: float, days: float, kind: EntryKind = "episodic", text: str | None = None,
        **fields: object) -> ScoredEntry:
    """A hit named `name` (its id, and its text unless given: a window with something to say), `days` after March
    2024, with its fused relevance `score`."""
    when = MARCH + timedelta(days=days)
    said = text if text is not None else f"Lena: {name}. let me tell you all about it, there is a lot to say"
    entry = MemoryEntry(id=name, tenant_id="t", conversation_id="c", kind=kind, text=said, occurred_at=when,
                        created_at=when, updated_at=when, **fields)  # type: ignore[arg-type]
    return ScoredEntry(entry=entry, score=score)


def order(hits: list[ScoredEntry], query: str, lang: str = "en", k: int | None = None) -> list[str]:
    """The hits' names in the order recall gives them for `query`."""
    ranked, _ = rerank(hits, read(query, lang), CURRENCY, k, figures.asked(query))
    return [h.entry.id for h in ranked]


def test_newer_evidence_about_the_same_thing_ranks_first_when_asked_about_now() -> None:
    """Of two comparably relevant episodes the newer comes first when the question says "now", in either language;
    a far less relevant one keeps its place however new."""
    hits = [hit("vienna", 1.0, 0), hit("graz", 0.7, 180), hit("smalltalk", 0.3, 200)]
    assert order(hits, "Where does Lena live now?") == ["graz", "vienna", "smalltalk"]
    assert order(hits, "莉娜现在住在哪儿？", "zh") == ["graz", "vienna", "smalltalk"]


@pytest.mark.parametrize("days", [0.25, 1, 120])
def test_newer_comes_first_counted_in_chats_not_days(days: float) -> None:
    """Age is counted in chats: when the newest chat does not restate the value (the rain at home), the chat that
    did still comes before the older one however far apart they are, six hours, a day or four months."""
    hits = [hit("bristol", 1.0, 0), hit("cardiff", 0.75, days), hit("rain at home", 0.7, 2 * days)]
    assert order(hits, "Where does Tomasz live?") == ["rain at home", "cardiff", "bristol"]
    assert order(hits, "Where did Tomasz live before?") == ["bristol", "cardiff", "rain at home"]


def test_windows_less_than_six_hours_apart_are_one_chat_and_stay_level() -> None:
    """A window less than SAME_CHAT after the one before is of its chat: relevance alone orders a chat's windows,
    however long the chat goes on; six hours later is another chat."""
    hours = 1 / 24
    chat = [hit("bristol", 1.0, 0), hit("cardiff", 0.75, 5 * hours), hit("rain at home", 0.7, 10 * hours)]
    assert order(chat, "Where does Tomasz live now?") == ["bristol", "cardiff", "rain at home"]
    two = [hit("bristol", 1.0, 0), hit("cardiff", 0.75, 6 * hours)]
    assert order(two, "Where does Tomasz live now?") == ["cardiff", "bristol"]


def test_evidence_of_the_least_favoured_chat_still_stands_above_small_talk() -> None:
    """Small talk gains nothing; evidence of every chat of the band gains a share, the least favoured one included
    (the oldest for the present, the newest for an earlier state, and a band of one chat), so evidence of the same
    relevance stands above it."""
    hits = [thanks(100, 1.0), hit("vienna", 0.9, 0), hit("graz", 0.65, 180)]
    assert order(hits, "Where does Lena live now?") == ["graz", "vienna", "thanks 100"]
    assert order(hits, "Where did Lena live before?") == ["vienna", "graz", "thanks 100"]
    assert order([thanks(100, 1.0), hit("vienna", 0.9, 0)], "Where did Lena live before?") == ["vienna", "thanks 100"]


def thanks(days: int, score: float = 1.0) -> ScoredEntry:
    """A window of small talk, `days` after March 2024."""
    return hit(f"thanks {days}", score, days, text="[Sat]\nLena: thanks!\nAssistant: you're welcome, have fun!")


def test_newer_small_talk_gains_nothing_for_its_age_and_dates_nothing() -> None:
    """A window of a few words ("thanks! / have fun!") says nothing of how things stand, however close its match:
    it keeps its relevance, and the newest window with something to say is what newer is measured from (so a
    chat long after the move does not make the move old); explain says why."""
    hits = [hit("vienna", 1.0, 0), thanks(400), hit("moved to graz", 0.8, 180)]
    ranked, reasons = rerank(hits, read("Where does Lena live now?", "en"), CURRENCY)
    assert [h.entry.id for h in ranked] == ["moved to graz", "vienna", "thanks 400"]
    assert "small talk, no gain for its age" in reasons["thanks 400"][0]
    assert "newer evidence first (+0.80 of 0.8: chat 2 of 2 by date)" in reasons["moved to graz"][0]


def test_a_band_of_small_talk_keeps_its_relevance_order() -> None:
    """When every hit of the band is small talk, none gains: relevance alone orders them."""
    hits = [thanks(0), thanks(300, 0.9), thanks(100, 0.8)]
    assert order(hits, "Where does Lena live now?") == ["thanks 0", "thanks 300", "thanks 100"]


def test_a_derived_claim_does_not_yield_to_newer_small_talk() -> None:
    """Small talk is no evidence against a fact or a profile: they stay above a newer "thanks!" window."""
    fact = hit("Lena lives in Graz", 1.4, 180, kind="fact")
    hits = [fact, thanks(200), hit("graz flat", 0.9, 180)]
    assert order(hits, "Where does Lena live?") == ["Lena lives in Graz", "graz flat", "thanks 200"]
    profile = hit("profile of Lena", 1.5, 200, kind="profile")
    assert order([profile, thanks(201)], "Where does Lena live?") == ["profile of Lena", "thanks 201"]


@pytest.mark.parametrize("text", ["Lena: We moved to Graz last week.\nAssistant: Congrats!",
                                  "Lena: rent went up to 1200 a month\nAssistant: ouch"])
def test_a_short_window_that_names_or_counts_something_is_news_not_small_talk(text: str) -> None:
    """A short window naming a place or giving a figure may be the change itself: it gains for being newer."""
    news = hit("news", 0.7, 180, text=text, entities=["Graz"] if "Graz" in text else [])
    assert order([hit("vienna", 1.0, 0), news], "Where does Lena live now?") == ["news", "vienna"]


@pytest.mark.parametrize(("query", "asks"), [
    ("How many beta testers are there now?", "How many"),
    ("how much is my rent", "how much"),
    ("What's the p95 latency of the checkout service?", "latency"),
    ("Which Postgres version does it run on?", "version"),
    ("What time is Margot's swim training?", "What time"),
    ("What does Sadie charge for a skein?", "charge"),
    ("房租每个月多少钱？", "多少"),
    ("梁宇目前每天几点上班？", "几"),
    ("组里现在几个人？", "几"),
    ("星图App的崩溃率是多少？", "多少"),
    ("潮汐记账最新发布的是哪个版本？", "版本"),
    ("转化率现在是？", "转化率"),
    ("门店数量是？", "数量"),
    ("Where does Lena live now?", None),
    ("What does Jonas do for work?", None),
    ("How long has Ana been in her job?", None),  # answered by a date ("since 2021")
    ("How often does Ana swim now?", None),  # answered in words ("every morning")
    ("How old is her dog?", None),
    ("a first-rate team?", None),
    ("例会现在是周几开？", None),
    ("她几乎每天都去吗？", None),
    ("她这几天怎么样？", None),
    ("小王好几次说想搬家，现在住哪？", None),
    ("几号开会？", None),
    ("我现在住在哪个城市？", None),
    ("他很直率吗？", None),
    ("现在的效率怎么样？", None)])
def test_a_question_asks_for_a_figure_by_its_own_words(query: str, asks: str | None) -> None:
    """How many / how much / 多少 / 几 before a counter, or the name of a measured thing (a latency, a version, a
    conversion rate); not a weekday (周几), a date (几号), "a few" (这几天, 好几次), nor a question usually answered
    by a date or in words (how long, how old, how often)."""
    found = figures.asked(query)
    assert (found.cue if found else None) == asks


@pytest.mark.parametrize(("text", "states"), [
    ("Ana: we're at 1500 testers now\nAssistant: wow", True),
    ("Ana: the team is six people again\nAssistant: ok", True),
    ("Ana: rent is now 2000 a month\nAssistant: ok", True),  # a number, not the year 2000
    ("Ana: (now 1500 testers)\nAssistant: ok", True),
    ("贺宁: 内测群已经两千多人了\n助手: 厉害", True),
    ("张思远: p99降到180ms了\n助手: 漂亮", True),
    ("小王: 九十分！\n助手: 棒", True),
    ("[Sat 2 March 2024]\nAna: the roadmap for next year (2025) is in the works\nAssistant: exciting", False),
    ("Ana: we finally moved (the week of 3 March 2024)\nAssistant: congrats", False),  # the compressor's note
    ("Ana: see you on March 9\nAssistant: ok", False),
    ("Ana: back on 9 March 2024, promise\nAssistant: ok", False),
    ("Ana: I've been there since 2021\nAssistant: ok", False),
    ("Ana: one of those days, no one called\nAssistant: hugs", False),
    ("[2024年11月25日]\n张思远: 明年（2025年）的规划在写了 想把下单链路拆成独立服务\n助手: 好", False),
    ("小王: 下周一（2024年5月13日）去报到\n助手: 好", False),  # the compressor's note
    ("小王: 3月15号搬家\n助手: 好", False),
    ("小王: 三月十五号搬家\n助手: 好", False),
    ("小王: 十分感谢，好一点了\n助手: 不客气", False),
    ("小王: 五月去冰岛，一个朋友说的\n助手: 好", False),
    ("小王: 三天前换了工作\n助手: 恭喜", False),
    ("[2024年1月13日]\n贺宁: 同步的bug修好了，好评多了\n助手: 太好了！", False)])
def test_a_window_states_a_figure_when_its_lines_hold_a_number_not_a_date(text: str, states: bool) -> None:
    """Digits, number words and Chinese numerals before a counter count; the window's date header, the dates the
    compressor writes beside relative times, dates as such, and words that only look like numbers ("no one",
    十分, 五月, 一个) do not."""
    assert figures.stated(hit("w", 1.0, 0, text=text).entry) is states


def test_a_word_with_digits_the_question_says_itself_is_no_answer() -> None:
    """"What's the p95 latency now?" is not answered by a window that says "p95" and no value, nor by "Q1"."""
    asked = figures.asked("What's the p95 latency of search now?")
    assert asked is not None and asked.named == {"p95"}
    said = hit("w", 1.0, 0, text="Viktor: search p95 is the Q1 goal\nAssistant: good luck").entry
    assert not figures.stated(said, asked.named)
    assert figures.stated(said)  # asked about something else, "p95" is a figure
    assert figures.stated(hit("w", 1.0, 0, text="Viktor: search p95 is 310ms now\nAssistant: nice").entry,
                          asked.named)


TESTERS = [hit("200 testers", 1.0, 0, text="Ana: the beta has 200 testers\nAssistant: nice start"),
           hit("roadmap", 0.9, 300, text="Ana: the roadmap for the app is in the works, all about sync and "
                                         "subscriptions\nAssistant: exciting"),
           hit("1500 testers", 0.75, 180, text="Ana: we're at 1500 testers since the blog post\nAssistant: wow")]


def test_a_newer_window_without_a_figure_gains_nothing_when_the_question_asks_for_one() -> None:
    """"How many testers now?": the newest window about the app that states no number (the roadmap) cannot say
    what the count is now, so the newest window stating one comes first; asked about the app in general, the
    roadmap, being newest, does (and the newer count before the older). explain says why."""
    assert order(TESTERS, "How many beta testers does the app have now?") == ["1500 testers", "200 testers",
                                                                              "roadmap"]
    assert order(TESTERS, "What is Ana doing with the app now?") == ["roadmap", "1500 testers", "200 testers"]
    _, reasons = rerank(TESTERS, read("How many testers now?", "en"), CURRENCY, None,
                         figures.asked("How many testers now?"))
    assert "states no figure and the question asks for one (How many), no gain for its age" in reasons["roadmap"][0]


def test_small_talk_is_said_to_be_small_talk_even_when_the_question_asks_for_a_figure() -> None:
    """A "thanks!" window states no figure either; explain names the reason it has of its own."""
    _, reasons = rerank([*TESTERS, thanks(400, 0.9)], read("How many testers now?", "en"), CURRENCY, None,
                        figures.asked("How many testers now?"))
    assert "small talk, no gain for its age" in reasons["thanks 400"][0]


def test_a_derived_claim_without_a_figure_gains_nothing_either() -> None:
    """A fact that states no number cannot say what the figure is now any more than a window can."""
    fact = hit("Ana runs the beta", 0.9, 300, kind="fact", text="Ana runs the beta of the app (stated 2025)")
    ranked, reasons = rerank([TESTERS[0], fact], read("How many testers now?", "en"), CURRENCY, None,
                         figures.asked("How many testers now?"))
    assert [h.entry.id for h in ranked] == ["200 testers", "Ana runs the beta"]
    assert "states no figure" in reasons["Ana runs the beta"][0]


def ranked_hit(name: str, dense: int | None, sparse: int | None, days: int,
               kind: EntryKind = "episodic") -> ScoredEntry:
    """A hit at these ranks of the dense and the sparse search (None: not found there), with the score the
    engine's fusion (k = 3) gives it."""
    score = sum(1.0 / (3 + rank - 1) for rank in (dense, sparse) if rank is not None)
    return hit(name, score, days, kind).model_copy(update={
        "dense_rank": dense, "dense_score": None if dense is None else 1.0 / dense,
        "sparse_rank": sparse, "sparse_score": None if sparse is None else 10.0 / sparse})


def test_facts_at_the_top_of_both_searches_do_not_push_the_evidence_out_of_the_band() -> None:
    """Short facts take the first ranks of both searches; counted among them, the newer window (sixth in both) is
    far below the older one (first) and out of the band. Counted among the episodes it is second, in the band, and
    being newer it comes first when asked about now."""
    facts = [ranked_hit(f"fact {i}", i, i, 0, kind="fact") for i in range(2, 6)]
    hits = [ranked_hit("vienna", 1, 1, 0), *facts, ranked_hit("moved to graz", 6, 6, 180)]
    scores = among_own_kind(hits, 3)
    assert (round(scores[0], 3), round(scores[-1], 3)) == (0.667, 0.5)  # 2 / (3 + 0) and 2 / (3 + 1)
    assert [round(x, 3) for x in scores[1:3]] == [0.667, 0.5]  # the facts, counted among themselves
    assert order(hits, "Where does Lena live now?")[0] == "moved to graz"
    assert rerank(hits, read("Where does Lena live now?", "en"), CURRENCY, engine_fused=False)[0][0].entry.id == \
        "vienna"  # deep recall's own fusion is kept as it is


def test_counting_by_kind_takes_each_search_on_its_own_and_profiles_with_facts() -> None:
    """A hit found by one search only is counted in that one; a profile is a derived claim, counted with facts;
    a hit without ranks (a search that did not ask for them, or the second hop's, ranked in another search) keeps its
    score and changes none of the others'."""
    hits = [ranked_hit("profile", 1, None, 0, kind="profile"), ranked_hit("fact", None, 1, 0, kind="fact"),
            ranked_hit("window", 2, 2, 0)]
    scores = among_own_kind(hits, 3)
    assert [round(x, 3) for x in scores] == [0.333, 0.333, 0.667]  # the window is first of its kind in both
    partly = [*hits, hit("no ranks", 0.1, 0)]
    assert [round(x, 3) for x in among_own_kind(partly, 3)] == [0.333, 0.333, 0.667, 0.1]


def test_windows_of_one_chat_are_ordered_by_relevance_alone() -> None:
    """Minutes apart is not newer: the windows of one chat gain alike, so they keep their relevance order."""
    hits = [hit("moved to graz", 1.0, 180), hit("thanks, bye", 0.8, 180)]
    assert order(hits, "Where does Lena live now?") == ["moved to graz", "thanks, bye"]


def test_an_earlier_state_finds_the_older_evidence_first_and_an_event_keeps_relevance() -> None:
    """"Before" questions prefer the older of comparably relevant hits; "when did" questions are left alone."""
    hits = [hit("graz", 1.0, 180), hit("vienna", 0.8, 0)]
    assert order(hits, "Where did Lena live before?") == ["vienna", "graz"]
    assert order(hits, "When did Lena move?") == ["graz", "vienna"]


def test_the_present_tense_alone_puts_newer_evidence_of_close_relevance_first() -> None:
    """Without a time word a present-tense question may still be about something that changed ("who is her
    partner?"): newer evidence overtakes older evidence only as much more relevant as its larger share of the
    smaller tense gain makes up for (half of it, of two chats), and a time word's larger gain reaches further."""
    close = [hit("partner ilse", 1.0, 0), hit("back with mateus", 0.7, 180)]
    assert order(close, "Who is Rosalind's partner?") == ["back with mateus", "partner ilse"]
    tense_only = Currency(band=0.8, weight=0.8, tense_weight=0.5)
    far = [hit("partner ilse", 1.0, 0), hit("back with mateus", 0.65, 180)]
    ranked, _ = rerank(far, read("Who is Rosalind's partner?", "en"), tense_only)
    assert [h.entry.id for h in ranked] == ["partner ilse", "back with mateus"]
    ranked, _ = rerank(far, read("Who is Rosalind's partner now?", "en"), tense_only)
    assert [h.entry.id for h in ranked] == ["back with mateus", "partner ilse"]


def test_without_a_tense_gain_the_present_tense_leaves_what_never_changed_to_relevance() -> None:
    """With ENGRAM_RECENCY_TENSE_WEIGHT=0 a present-tense question without a time word is ordered by relevance."""
    hits = [hit("dog named bruno", 1.0, 0), hit("new flat", 0.8, 180)]
    ranked, _ = rerank(hits, read("What is the name of Lena's dog?", "en"), NO_TENSE_GAIN)
    assert [h.entry.id for h in ranked] == ["dog named bruno", "new flat"]


def test_only_the_top_k_trade_places() -> None:
    """Relevance picks what is returned; time orders it: a newer hit beyond k is not pulled in."""
    hits = [hit("vienna", 1.0, 0), hit("other", 0.9, 60), hit("graz", 0.8, 180)]
    assert order(hits, "Where does Lena live now?", k=2) == ["other", "vienna", "graz"]


def test_a_fact_never_stands_above_newer_evidence_in_the_band() -> None:
    """A distilled fact matches better than any episode, yet newer evidence about the same question outranks it;
    a profile (lines of many ages) stands below every episode of the band; even without a time word."""
    hits = [hit("fact vienna", 1.4, 0, kind="fact"), hit("profile", 1.2, 10, kind="profile"),
            hit("graz flat", 1.0, 180), hit("vienna flat", 0.9, 0)]
    ranked, reasons = rerank(hits, read("Where does Lena live?", "en"), NO_TENSE_GAIN)
    names = [h.entry.id for h in ranked]
    assert names.index("graz flat") < names.index("fact vienna")
    assert names.index("vienna flat") < names.index("profile")
    assert any("derived claim" in why for why in reasons["fact vienna"])


def test_a_fact_marked_outdated_ranks_below_the_evidence_that_outdates_it() -> None:
    """Even outside the band, a possibly outdated fact goes below the newer episode named in its mark."""
    hits = [hit("fact vienna", 2.0, 0, kind="fact", outdated_by="graz flat"), hit("graz flat", 0.2, 180)]
    ranked, reasons = rerank(hits, read("Where does Lena live?", "en"), CURRENCY)
    assert [h.entry.id for h in ranked] == ["graz flat", "fact vienna"]
    assert any("possibly outdated" in why for why in reasons["fact vienna"])


def test_a_newer_episode_about_the_same_thing_outdates_a_fact_and_its_own_windows_do_not() -> None:
    """Among the episodes the fact's own text finds, one in the band, said hours later, that the fact was not read
    from outdates it; the windows it was read from (where it was said, and where the rules read it again), small talk
    outside the band and the rest of the same chat never do."""
    fact = hit("Lena lives in Vienna", 2.0, 90, kind="fact", value="Vienna", source_turn_ids=["t5", "t1"]).entry
    source = hit("window of t1", 1.0, 0, source_turn_ids=["t1", "t2"])
    again = hit("read again: I live in Vienna", 0.9, 90, source_turn_ids=["t5"])
    later_that_day = hit("the next window, same chat", 0.9, 90, source_turn_ids=["t6"])
    moved = hit("new flat in Graz", 0.6, 180, source_turn_ids=["t9"])
    small_talk = hit("thanks, bye", 0.3, 200, source_turn_ids=["t12"])
    assert outdated.mark(fact, [source, again, later_that_day, small_talk], band=0.5, rrf_k=3) is None
    # a window sharing the fact's turn is its own, even dated past the gap (a long chat merged into one window)
    merged = hit("merged window holding t5", 0.95, 95, source_turn_ids=["t5", "t7"])
    assert outdated.mark(fact, [source, merged, later_that_day, small_talk], band=0.5, rrf_k=3) is None
    assert outdated.mark(fact, [source, again, moved, small_talk], band=0.5, rrf_k=3) == "new flat in Graz"
    assert outdated.mark(fact, [], band=0.5, rrf_k=3) is None


def test_the_band_is_measured_from_the_best_episode_the_fact_was_not_read_from() -> None:
    """The source window says the fact nearly word for word and takes the first rank of both searches: the band is
    measured from the best other episode, so newer evidence a rank or two lower is in it; without the source among
    the hits, from the best hit as before."""
    fact = hit("Casimir lives in Dubuque", 2.0, 0, kind="fact", value="Dubuque", source_turn_ids=["t1"]).entry

    def ranked(name: str, days: float, turn: str, dense: int, sparse: int) -> ScoredEntry:
        """A hit as the outdated job gets it: its ranks in both searches, its score their fusion (rrf_k 3)."""
        entry = hit(name, 0, days, source_turn_ids=[turn]).entry
        return ScoredEntry(entry=entry, score=1 / (2 + dense) + 1 / (2 + sparse), dense_rank=dense,
                           dense_score=1.0 - dense / 10, sparse_rank=sparse, sparse_score=10.0 - sparse)

    source = ranked("I live in Dubuque", 0, "t1", 1, 1)
    fish = ranked("fish soup recipe", -30, "t0", 2, 2)  # older than the fact: it cannot outdate it
    peoria = ranked("officially a Peoria resident", 120, "t5", 3, 4)
    # The source's 2/3 would put the bar at 0.4, above peoria's 1/5 + 1/6 = 0.367; the fish soup's 1/2 puts it at 0.3.
    assert outdated.mark(fact, [source, fish, peoria], band=0.4, rrf_k=3) == peoria.entry.id
    assert outdated.mark(fact, [fish, peoria], band=0.4, rrf_k=3) == peoria.entry.id
    assert outdated.mark(fact, [source, fish], band=0.4, rrf_k=3) is None


def test_naming_the_value_is_evidence_about_the_same_thing_not_a_restatement() -> None:
    """A pet is named when it moves out, or when a look-alike makes its owner sentimental: a later window of the
    band that names the value outdates the fact like any evidence about the same thing, the earliest of them
    first. Only the rules' own reading says the fact again (its windows, above)."""
    fact = hit("Kwame has a bird named Mango", 2.0, 0, kind="fact", value="Mango", source_turn_ids=["t1"]).entry
    source = hit("window of t1", 1.0, 0, source_turn_ids=["t1"])
    niece = hit("niece", 0.8, 180, source_turn_ids=["t5"], text="Kwame: mango now lives with my niece Abena")
    lookalike = hit("lookalike", 0.8, 400, source_turn_ids=["t9"],
                    text="Kwame: saw a budgie that looked exactly like Mango, got all sentimental")
    assert outdated.mark(fact, [source, niece], band=0.5, rrf_k=3) == "niece"
    assert outdated.mark(fact, [source, lookalike], band=0.5, rrf_k=3) == "lookalike"
    assert outdated.mark(fact, [source, niece, lookalike], band=0.5, rrf_k=3) == "niece"


def test_a_liking_is_searched_for_without_its_object() -> None:
    """A preference's value is a verdict ("likes") and its object is in the attribute: the fact's words without the
    band ("Teodor likes") are what it is about, and a later window of the band outdates it whatever it names."""
    fact = hit("fact", 2.0, 0, kind="fact", text="Teodor likes Altin Gün (stated 9 April 2022)",
               attribute="preference:altin gün", value="likes", source_turn_ids=["t1"]).entry
    source = hit("source", 1.0, 0, source_turn_ids=["t1"])
    band = hit("band", 0.8, 180, source_turn_ids=["t5"], text="Teodor: Altin Gün live in Oslo next month!")
    assert outdated.mark(fact, [source, band], band=0.5, rrf_k=3) == "band"
    assert outdated._asked(fact).split() == ["Teodor", "likes"]


def test_episodes_that_tie_in_a_search_share_their_rank_whatever_their_ids() -> None:
    """Two episodes with the same BM25 score tie; the engine orders them by id (which embeds the tenant), so the
    outdated job gives both the better rank: the fused scores and the mark are the same whichever comes first."""
    fact = hit("Ana lives in Porto", 2.0, 0, kind="fact", value="Porto", source_turn_ids=["t1"]).entry
    source = ScoredEntry(entry=hit("window of t1", 0, 0, source_turn_ids=["t1"]).entry, score=1 / 3 + 1 / 3,
                         dense_rank=1, dense_score=0.9, sparse_rank=1, sparse_score=2.0)
    again = hit("still in Porto", 0, -30, source_turn_ids=["t5"]).entry  # older than the fact: never outdates
    moved = hit("the new flat", 0, 150, source_turn_ids=["t9"]).entry

    def engine(sparse_order: tuple[MemoryEntry, MemoryEntry]) -> list[ScoredEntry]:
        """Dense ranks again 2, moved 3; in BM25 both score 1.0, ranked 2 and 3 in the order given."""
        dense = {again.id: (2, 0.8), moved.id: (3, 0.7)}
        sparse = {e.id: rank for rank, e in enumerate(sparse_order, start=2)}
        return [source] + [ScoredEntry(entry=e, score=1 / (2 + dense[e.id][0]) + 1 / (2 + sparse[e.id]),
                                       dense_rank=dense[e.id][0], dense_score=dense[e.id][1],
                                       sparse_rank=sparse[e.id], sparse_score=1.0) for e in (again, moved)]

    one, other = engine((again, moved)), engine((moved, again))
    assert outdated.shared_ranks(one, rrf_k=3) == outdated.shared_ranks(other, rrf_k=3)
    assert outdated.shared_ranks(one, rrf_k=3)[moved.id] == pytest.approx(1 / 5 + 1 / 4)
    # The bar is the best episode besides the source: again, 1/4 + 1/4 = 0.5. moved is in the band with the better
    # of the tied ranks (0.45 against 0.5 x 0.85 = 0.425), not with the worse (1/5 + 1/5 = 0.40).
    assert [outdated.mark(fact, hits, band=0.15, rrf_k=3) for hits in (one, other)] == [moved.id, moved.id]


def test_hits_with_and_without_ranks_are_not_compared() -> None:
    """Fused scores from ranks and the engine's own scores are two scales: a mix of explained and unexplained hits is
    refused rather than compared."""
    explained = ScoredEntry(entry=hit("a", 0, 0).entry, score=0.5, dense_rank=1, dense_score=0.9)
    with pytest.raises(ValueError, match="cannot be compared"):
        outdated.shared_ranks([explained, hit("b", 0.4, 0)], rrf_k=3)
    assert outdated.shared_ranks([hit("b", 0.4, 0)], rrf_k=3) == {"b": 0.4}
