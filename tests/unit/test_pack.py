"""Recall by budget: the best set of entries that fits, one entry for each piece of evidence, and the relevant
material left out counted; and a question about the order of events answered as a dated timeline."""
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from engram_client.contract import RecallRequest, Timings
from shared.retrieval.pack import evidence, pack
from shared.retrieval.plan import plan
from shared.retrieval.recall import Searched
from shared.retrieval.render import MEMORIES_HEADER, TIMELINE_HEADER, block, render
from shared.retrieval.respond import chosen, picking_order
from shared.retrieval.tense import sequence
from shared.store import MemoryEntry, ScoredEntry
from shared.text import tokens

T0 = datetime(2023, 5, 8, tzinfo=UTC)


def hit(entry_id: str, text: str, turns: list[str], kind: str = "episodic", day: int = 0,
        conversation: str = "c") -> ScoredEntry:
    when = T0 + timedelta(days=day)
    entry = MemoryEntry(id=entry_id, tenant_id="t", conversation_id=conversation, kind=kind, text=text,  # type: ignore[arg-type]
                        occurred_at=when, created_at=T0, updated_at=T0, source_turn_ids=turns,
                        turn_times=[when + timedelta(seconds=30 * i) for i in range(len(turns))])
    return ScoredEntry(entry=entry, score=1.0)


def cost(h: ScoredEntry) -> int:
    return tokens.count(block(h)) + 1


def test_an_entry_whose_evidence_is_packed_already_is_left_out_and_not_counted() -> None:
    """A fact whose turn the packed window holds adds nothing: it is not packed and not counted as left out."""
    window = hit("w", "Lena: we moved to Leuven last week, the flat is lovely.", ["t1", "t2", "t3"])
    fact = hit("f", "Lena lives in Leuven.", ["t2"], kind="fact")
    packed = pack([window, fact], cost, 1000)
    assert [h.entry.id for h in packed.hits] == ["w"]
    assert (packed.left_out, packed.left_out_tokens) == (0, 0)


def test_a_packed_entry_a_later_one_holds_entirely_gives_its_tokens_back() -> None:
    """A fact ranked above the window that states it is taken out when the window is packed; of two entries with the
    same evidence the shorter is packed, in the better one's place."""
    fact = hit("f", "Lena lives in Leuven.", ["t2"], kind="fact")
    window = hit("w", "Lena: we moved to Leuven last week, the flat is lovely.", ["t1", "t2", "t3"])
    long_same = hit("x", "Sam: " + "tell me everything about the trip " * 5, ["t9"], conversation="d")
    short_same = hit("y", "Sam: the trip was great.", ["t9"], conversation="d")
    packed = pack([fact, long_same, window, short_same], cost, 1000)
    assert [h.entry.id for h in packed.hits] == ["y", "w"]


def test_what_did_not_fit_is_counted_and_a_later_shorter_entry_still_fits() -> None:
    """Within a small budget the long second entry is left out (counted, with its tokens) and the short third fits."""
    first = hit("a", "Ana moved to Lisbon in May.", ["t1"])
    long = hit("b", "word " * 300, ["t2"])
    short = hit("c", "Ana likes sardines.", ["t3"])
    packed = pack([first, long, short], cost, cost(first) + cost(short))
    assert [h.entry.id for h in packed.hits] == ["a", "c"]
    assert (packed.left_out, packed.left_out_tokens) == (1, cost(long))


def test_the_best_entry_alone_is_kept_when_it_does_not_fit() -> None:
    """When the best entry does not fit, it alone is returned (the context shortens it rather than drop the best
    memory for lesser ones that fit); with no room at all, nothing, and every entry counts as left out."""
    best, small = hit("a", "word " * 300, ["t1"]), hit("b", "Ana likes sardines.", ["t2"])
    packed = pack([best, small], cost, 10)
    assert [h.entry.id for h in packed.hits] == ["a"] and packed.left_out == 1
    nothing = pack([best, small], cost, 0)
    assert nothing.hits == [] and nothing.left_out == 2


def test_a_merged_keeper_holds_only_its_own_turns_of_its_conversation() -> None:
    """A keeper lists the turns of the duplicates it absorbed (other chats number their turns the same way): only its
    own turns count as its conversation's, so another entry of its chat with those numbers is still packed."""
    keeper = hit("k", "Ana: I moved to Lisbon.", ["1", "2", "3", "4", "5", "6"])
    keeper = keeper.model_copy(update={"entry": keeper.entry.model_copy(
        update={"merged_from": ["dup"], "unmerged": {"source_turn_ids": ["1", "2", "3"]}})})
    later = hit("l", "Ana: my sister's wedding is in Porto.", ["4", "5", "6"])
    assert [h.entry.id for h in pack([keeper, later], cost, 1000).hits] == ["k", "l"]
    assert [h.entry.id for h in pack([later, keeper], cost, 1000).hits] == ["l", "k"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.sets(st.integers(0, 12), min_size=1, max_size=4)),
                min_size=1, max_size=14), st.integers(20, 400))
def test_packing_never_exceeds_the_room_nor_repeats_evidence(items: list[tuple[int, set[int]]], room: int) -> None:
    """For any ranked entries and room: the packed entries fit the room (unless only the best one is returned), no
    packed entry's evidence is held entirely by another, the rank order is kept, and what is counted as left out
    is each piece of evidence the packed entries do not hold."""
    hits = [hit(f"e{i}", "word " * size, [f"t{t}" for t in sorted(turns)]) for i, (size, turns) in enumerate(items)]
    packed = pack(hits, cost, room)
    kept = packed.hits
    assert kept
    assert sum(cost(h) for h in kept) <= room or len(kept) == 1
    for h in kept:
        assert not any(evidence(h) <= evidence(o) for o in kept if o is not h), h.entry.id
    order = [min(i for i, o in enumerate(hits) if evidence(o) == evidence(h)) for h in kept]
    assert order == sorted(order)  # in the place of the best ranked entry with the same evidence
    held = set().union(*(evidence(h) for h in kept))
    assert packed.left_out == len({evidence(h) for h in hits if h not in kept and not evidence(h) <= held})


def test_questions_about_the_order_of_events_are_recognised_in_english_and_chinese() -> None:
    """Order, which came first, before or after, put in order, 先…还是先…, 先…后…, 先后, 之前还是之后 ask for the order
    of events; an earlier state ("before?"), a thing's first ("her first job"), what happened at a time ("last summer",
    "then"), an order one places, a DNA sequence, 先生, 先进, 祖先 and the present do not."""
    asks = ["In what order did Mia adopt the cat, move, and start the job?", "Which came first: the trip or the exam?",
            "Did Omar get the visa before or after the interview?", "What did she do first?",
            "Put these in order: the launch, the hire, the funding.", "王芳是先买房还是先结婚的？",
            "这三件事的先后顺序是什么？", "搬家是在换工作之前还是之后？", "Ana先去了哪座山，后去了哪座山？",
            "小李是先考驾照后买车的吗？", "她是先去的巴黎后去的伦敦吗？", "他先辞职后创业的吗？",
            "Do you remember the order these happened in: the move, the job?", "What order did these happen in?",
            "Can you list the order in which they happened?", "Remind me of the order of these: A, B, C.",
            "What order did I visit Rome and Paris in?", "What was the order I visited the cities in?",
            "她先去了巴黎，在那待了一周后再去了哪？", "我先去了北京和天津还有好几个别的很远很远的城市然后去了哪里？",
            "她先去了北京，然后去了哪里？", "他先报了名，接着做了什么？", "先吃饭再去看电影的是谁？"]
    not_asked = ["What was her first job?", "Where did Lena live before?", "Where does Lena live now?",
                 "王先生现在住在哪里？", "她以前住在哪？", "How much did he spend on his first guitar?",
                 "What did you do last summer?", "What happened last night?", "What did she do then?",
                 "First, where does Melanie live?", "Did she put in an order for pizza?", "Who finished first?",
                 "Where did I put my order number?", "What was the DNA sequence she studied?", "Is this her first?",
                 "What did she do after work?", "最先进的手机是哪款？", "哪个先进一些？", "先锋队最后怎么样了？",
                 "他在先进制造公司工作之后去了哪里？", "先天性心脏病手术后恢复得怎么样？", "他的祖先后来怎样？",
                 "他是谁先生？", "首先他去了哪", "优先处理什么", "立伟接下来计划参加什么比赛？",
                 "她先住在上海，后来搬到了哪里？", "请先说说他后悔什么？", "先天性的病以后会好吗？",
                 "请先告诉我他毕业以后做了什么？", "你先说说他大学毕业之后去了哪里？",
                 "先别管这个，她最后选了哪所学校？", "先说结论：他后年打算做什么？",
                 "我先问一下，他饭后一般做什么？", "先确认一下，他的后续计划是什么？",
                 "先帝的皇后是谁？", "围棋里先手和后手有什么区别？", "先验概率和后验概率有什么区别？",
                 "他们排队讲究先来后到吗？", "先别急，他再婚了吗？", "先说说，你再告诉我他去哪了？",
                 "我先查一下，他接着要去哪？", "What order did I place at the cafe?",
                 "What was the order of pizza toppings?",
                 "What did I order in the cafe?", "先别急，以后再说吧，他住哪？"]
    assert all(sequence(q) for q in asks), [q for q in asks if not sequence(q)]
    assert not any(sequence(q) for q in not_asked), [q for q in not_asked if sequence(q)]


def test_a_timeline_dates_each_entry_that_does_not_begin_with_its_date() -> None:
    """On a timeline each entry is dated in one zone (UTC; unless its text begins with its date) under the timeline
    header, so the dates read in order whatever zone each turn was said in."""
    dated = hit("a", "[Mon 8 May 2023]\nLena: we moved.", ["t1"])
    plain = hit("b", "Lena lives in Leuven.", ["t2"], kind="fact", day=3)
    text, _, kept = render([dated, plain], [], None, timeline=True)
    assert text.startswith(TIMELINE_HEADER)
    assert "[2023-05-11] Lena lives in Leuven." in text and "[2023-05-08] [Mon" not in text
    assert kept == [dated, plain]
    east = timezone(timedelta(hours=9))
    early = hit("e", "Event A.", ["t3"]).entry.model_copy(update={"turn_times": [datetime(2024, 5, 2, 1, tzinfo=east)]})
    assert block(ScoredEntry(entry=early, score=1.0), timeline=True).startswith("[2024-05-01]")


def test_time_orders_what_relevance_picked_within_a_budget() -> None:
    """Under a budget, the hit time put first fits first, then the others in relevance's order, and the reply gives
    them in time's order: newer chatter time raised above the evidence no longer crowds it out of a small budget
    (newer first still), and without a budget the order is time's alone."""
    said = "Ana: I go running along the river every morning to clear my head, about five kilometres."
    evidence = hit("evidence", said, ["t1"], day=0)
    chatter = [hit(f"chat{i}", f"Ana: running again today, day {i}, legs tired.", [f"t{10 + i}"], day=10 + i)
               for i in range(3)]
    relevance = [evidence, *chatter]             # what relevance alone ranks
    by_time = [chatter[2], chatter[1], chatter[0], evidence]  # newest first: what time made of it (currency.py)
    assert [h.entry.id for h in picking_order(by_time, relevance)] == ["chat2", "evidence", "chat0", "chat1"]
    assert picking_order(by_time, None) == by_time
    searched = Searched(by_time, {}, {}, [], Timings(), plan("What does Ana do to clear her head?", T0),
                        relevance=relevance)
    two = cost(chatter[2]) + cost(evidence) + tokens.count(MEMORIES_HEADER)
    picked = chosen(searched, RecallRequest(query="q", token_budget=two), "cl100k_base")
    assert [h.entry.id for h in picked.hits] == ["chat2", "evidence"]
    everything = chosen(searched, RecallRequest(query="q", k=4), "cl100k_base")
    assert [h.entry.id for h in everything.hits] == ["chat2", "chat1", "chat0", "evidence"]


def test_a_claim_fits_only_after_everything_time_put_above_it() -> None:
    """A short fact matches best, but time put the newer evidence above it (currency.py): under a budget it is
    picked only after every hit time put above it, so with room for two the reply holds the newest window and the
    one that outdates the fact, never the fact without them; relevance still picks among the windows."""
    stale = hit("fact", "Ana lives in Graz.", ["t1"], kind="fact", day=0)
    e1 = hit("e1", "Ana: the flat in Graz is lovely, the Mur is right there.", ["t1"], day=0)
    e2 = hit("e2", "Ana: we moved to Vienna last weekend, boxes everywhere.", ["t5"], day=30)
    e3 = hit("e3", "Ana: Vienna's trams are so much better than I thought.", ["t9"], day=40)
    relevance = [stale, e1, e3, e2]
    by_time = [e3, e2, e1, stale]
    assert [h.entry.id for h in picking_order(by_time, relevance)] == ["e3", "e1", "e2", "fact"]
    searched = Searched(by_time, {}, {}, [], Timings(), plan("Where does Ana live?", T0), relevance=relevance)
    two = cost(e3) + max(cost(e1), cost(e2)) + tokens.count(MEMORIES_HEADER)
    picked = [h.entry.id for h in chosen(searched, RecallRequest(query="q", token_budget=two), "cl100k_base").hits]
    assert picked == ["e3", "e1"] and "fact" not in picked
    three = cost(e3) + cost(e1) + cost(e2) + tokens.count(MEMORIES_HEADER)
    held = chosen(searched, RecallRequest(query="q", token_budget=three), "cl100k_base")
    assert [h.entry.id for h in held.hits] == ["e3", "e2", "e1"] and held.picked == ["e3", "e1", "e2"]
    # a claim time put first is picked first; one relevance did not list is picked in time's place
    assert [h.entry.id for h in picking_order([stale, e3], [e3])] == ["fact", "e3"]


def test_no_claim_goes_in_after_evidence_that_did_not_fit() -> None:
    """Time put a long window of newer evidence above a short fact: when the window does not fit, the fact does not
    go in in its place (it would state what the left-out evidence contradicts), and what was left out is counted
    once for each piece of evidence."""
    e3 = hit("e3", "Ana: Vienna's trams are better than I thought.", ["t9"], day=40)
    e2 = hit("e2", "Ana: we moved to Vienna last weekend, " + "boxes everywhere, " * 30, ["t5"], day=30)
    stale = hit("fact", "Ana lives in Graz.", ["t2"], kind="fact", day=0)
    room = cost(e3) + cost(stale)
    packed = pack([e3, e2, stale], cost, room)
    assert [h.entry.id for h in packed.hits] == ["e3"]
    assert (packed.left_out, packed.left_out_tokens) == (2, cost(e2) + cost(stale))
    assert [h.entry.id for h in pack([e3, stale, e2], cost, room).hits] == ["e3", "fact"]  # ranked above: it goes
