"""Later counts within a conversation: a window that states the thing again (what the earlier one shares with the
question, and a value of the kind asked) is the newer evidence whatever the gap; windows of the same chat that are
merely near in time keep their relevance order; derived claims and outdated marks follow the same rule.

The sentences here are written for these tests and are not the evaluation's (shared/evaluation/data/updates)."""
from datetime import UTC, datetime, timedelta

import pytest

from engram_client.contract import EntryKind
from shared.consolidation import outdated
from shared.embedding import Bm25Encoder
from shared.evidence import figures
from shared.evidence.restated import Reader, kind_of
from shared.retrieval.currency import Currency, Restating, rerank
from shared.retrieval.tense import read, topic
from shared.store import MemoryEntry, ScoredEntry

START = datetime(2025, 6, 9, 14, 0, tzinfo=UTC)
CURRENCY = Currency(band=0.5, weight=0.8)
SPARSE = Bm25Encoder()


def said(name: str, score: float, minutes: float, lines: str, kind: EntryKind = "episodic",
         **fields: object) -> ScoredEntry:
    """A hit named `name`, `minutes` into the chat, holding `lines` (one "Speaker: text" a line)."""
    when = START + timedelta(minutes=minutes)
    fields.setdefault("conversation_id", "c")
    entry = MemoryEntry(id=name, tenant_id="t", kind=kind, text=lines, occurred_at=when,
                        created_at=when, updated_at=when, **fields)  # type: ignore[arg-type]
    return ScoredEntry(entry=entry, score=score)


def ranked(hits: list[ScoredEntry], query: str, lang: str = "en",
           restating: bool = True) -> tuple[list[str], dict[str, list[str]]]:
    """The hits' names in recall's order for `query`, and why each moved."""
    reader = Reader(SPARSE)
    judge = Restating(reader, reader.subject(topic(query), figures.asked(query))) if restating else None
    out, reasons = rerank(hits, read(query, lang), CURRENCY, None, figures.asked(query), True, judge)
    return [h.entry.id for h in out], reasons


TICKETS = [
    said("thirty", 1.0, 0, "Mara: the migration backlog has 30 open tickets, mostly about the billing screens\n"
                           "Assistant: Thirty is a lot for two weeks. I would group them by screen and start with "
                           "the ones that block the invoices, then the reports."),
    said("sprint", 0.8, 25, "Mara: the sprint review moved to Thursday afternoon, 4 designers asked for it\n"
                            "Assistant: Thursday works; send the agenda the day before so the 4 designers can "
                            "prepare their mock-ups and the team can read them first."),
    said("twenty-four", 0.7, 40, "Mara: good news, we closed a few of them, the backlog is down to 24 tickets\n"
                                 "Assistant: Nice progress. At this pace the billing screens will be clear by "
                                 "the end of next week."),
]


def test_a_count_reported_again_in_the_same_chat_is_the_newer_evidence() -> None:
    """Forty minutes after "30 open tickets" the user says "down to 24": for a question about now the later window
    comes first although the first matches the question better, and explain says which entry it restates."""
    names, reasons = ranked(TICKETS, "How many tickets are in the migration backlog?")
    assert names.index("twenty-four") < names.index("thirty")
    assert any("restates entry thirty" in why for why in reasons["twenty-four"]), reasons["twenty-four"]


def test_without_the_judge_the_windows_of_a_chat_stay_in_relevance_order() -> None:
    """The rule is what moves them: the same hits without it keep the order relevance gave."""
    names, _ = ranked(TICKETS, "How many tickets are in the migration backlog?", restating=False)
    assert names.index("thirty") < names.index("twenty-four")


def test_a_later_window_about_other_things_keeps_its_relevance_order() -> None:
    """The sprint review, said between the two counts, states a figure but shares nothing of the backlog with the
    question: it gains nothing for being later, so it stays below the first count."""
    names, reasons = ranked(TICKETS[:2], "How many tickets are in the migration backlog?")
    assert names == ["thirty", "sprint"]
    assert not any("restates" in why for why in reasons.get("sprint", []))


def test_an_earlier_value_is_asked_for_and_the_older_window_comes_first() -> None:
    """Asked what the backlog was before, the first count comes first, the restatement last."""
    names, _ = ranked(TICKETS, "How many tickets were in the migration backlog before?")
    assert names.index("thirty") < names.index("twenty-four")


def test_a_later_window_that_names_the_thing_without_a_figure_does_not_restate_it() -> None:
    """"how many" asks for a figure: a later window about the backlog tickets that states none is no restatement
    (judged by the reader itself; recall also gives a window without a figure no gain for its age)."""
    reader = Reader(SPARSE)
    query = "How many tickets are in the migration backlog?"
    subject = reader.subject(query, figures.asked(query))
    plan = said("plan", 0.75, 50, "Mara: can you help me plan how we tackle the migration backlog tickets?\n"
                                  "Assistant: Sure, start with the ones that block invoicing.")
    counted = said("counted", 0.75, 50, "Mara: we tackled the migration backlog tickets, 24 are left")
    assert reader.restates(plan.entry, TICKETS[0].entry, subject) is None
    assert reader.restates(counted.entry, TICKETS[0].entry, subject) is not None


def test_a_window_of_another_conversation_restates_nothing() -> None:
    """Within one conversation is what is judged: the same words in another conversation minutes later are no
    restatement (two chats of one person at once stay level)."""
    reader = Reader(SPARSE)
    query = "How many tickets are in the migration backlog?"
    other = said("other", 0.7, 40, TICKETS[2].entry.text, conversation_id="elsewhere")
    assert reader.restates(other.entry, TICKETS[0].entry, reader.subject(query, figures.asked(query))) is None


def test_a_second_restatement_of_the_first_value_comes_after_the_first_restatement() -> None:
    """30, then 28 (restating 30), then 24 (restating 30 in other words, sharing too little with 28): 24 is said
    last about the thing, so it comes first, then 28, then 30."""
    hits = [said("thirty", 1.0, 0, "Mara: the migration backlog has 30 open tickets"),
            said("twenty-eight", 0.95, 10, "Mara: sorry, the migration has 28 open tickets"),
            said("twenty-four", 0.9, 40, "Mara: the backlog is down to 24 tickets")]
    names, _ = ranked(hits, "How many open tickets does the migration backlog have?")
    assert names == ["twenty-four", "twenty-eight", "thirty"]


def test_each_correction_of_several_is_a_step_newer_than_the_one_before() -> None:
    """A budget corrected twice in one sitting: the last value first, then the one before, then the first."""
    hits = [said("first", 1.0, 0, "Ilse: the grant budget I am asking for is 42,000 euros in total\n"
                                  "Assistant: That fits the foundation's usual range for a pilot."),
            said("second", 0.9, 10, "Ilse: sorry, I mixed up the sheets, the grant budget is 48,000 euros\n"
                                    "Assistant: Noted, 48,000 then; the travel line needs a sentence more."),
            said("third", 0.8, 30, "Ilse: after the call with the treasurer the grant budget is 45,500 euros\n"
                                   "Assistant: 45,500 is easier to defend; I updated the summary table.")]
    names, reasons = ranked(hits, "What grant budget is Ilse asking for?")
    assert names == ["third", "second", "first"]
    assert any("step 3 of 3" in why for why in reasons["third"]), reasons["third"]


def test_a_restatement_in_an_older_chat_does_not_narrow_the_newer_chats_lead() -> None:
    """A correction within last week's chat orders that chat's windows, not the chats: this week's count, less
    relevant, still comes before both of last week's (as it does without the correction)."""
    hits = [said("thirty", 1.0, 0, "Mara: the migration backlog has 30 open tickets, mostly billing screens"),
            said("twenty-eight", 0.9, 20, "Mara: correction, the migration backlog has 28 open tickets, not 30"),
            said("this-week", 0.55, 10 * 24 * 60, "Mara: this week the migration backlog is at 24 open tickets")]
    names, _ = ranked(hits, "How many open tickets does the migration backlog have?")
    assert names == ["this-week", "twenty-eight", "thirty"]


def test_a_date_moved_in_the_same_chat_counts_for_a_question_about_when() -> None:
    """"When is the launch?" asks for a date: the later window that moves it comes first; a later one that only
    talks about the launch (no date) is no restatement."""
    hits = [said("third", 1.0, 0, "Oren: the launch of the mobile app is on 3 March, the store review is done\n"
                                  "Assistant: Good, that leaves a week for the press kit."),
            said("talk", 0.8, 15, "Oren: I am nervous about the launch of the mobile app, honestly\n"
                                  "Assistant: That is normal; a checklist helps with the nerves."),
            said("ninth", 0.7, 35, "Oren: we pushed the launch of the mobile app to 9 March, legal wants a look\n"
                                   "Assistant: A week later is fine, the press kit gets more time.")]
    names, reasons = ranked(hits, "When is the launch of the mobile app?")
    assert names.index("ninth") < names.index("third") < names.index("talk")
    assert any("states a date again" in why for why in reasons["ninth"]), reasons["ninth"]


def test_the_same_holds_in_chinese() -> None:
    """同一次聊天里预算改了：问现在的预算，后说的那个窗口排在前面。"""
    hits = [said("五万", 1.0, 0, "罗敏：我们家装修预算定在十五万元，主要花在厨房和卫生间\n"
                                 "助手：十五万的话，厨房可以选中档的橱柜，卫生间做干湿分离。"),
            said("十八万", 0.7, 45, "罗敏：刚和老公商量了，装修预算提高到十八万元，想把阳台也改了\n"
                                   "助手：十八万够把阳台一起做了，建议先定水电方案。")]
    names, reasons = ranked(hits, "罗敏家的装修预算是多少？", "zh")
    assert names == ["十八万", "五万"]
    assert any("restates" in why for why in reasons["十八万"]), reasons


def test_a_fact_read_from_the_first_count_yields_to_the_restatement_and_explain_says_so() -> None:
    """A fact the rules read from the first window ("30 open tickets") stands below the later window that states
    the count again, though a distilled claim matches the question best."""
    fact = said("fact", 1.5, 0, "Mara's migration backlog has 30 open tickets (stated 9 June 2025)", kind="fact",
                source_turn_ids=["1"], attribute="count:backlog tickets", value="30")
    hits = [fact, *[h.model_copy(update={"entry": h.entry.model_copy(update={"source_turn_ids": [str(i + 1)]})})
                    for i, h in enumerate(TICKETS)]]
    names, reasons = ranked(hits, "How many tickets are in the migration backlog?")
    assert names.index("twenty-four") < names.index("fact")
    why = next(why for why in reasons["fact"] if "restates entry fact" in why)
    assert why.count("(") == why.count(")") and why.endswith("entry twenty-four"), why


def fact(value: str, text: str, minutes: float = 0) -> MemoryEntry:
    """A fact stated `minutes` into the chat, read from its first turn."""
    return said("f", 1.0, minutes, text, kind="fact", attribute=f"count:{value}", value=value,
                source_turn_ids=["1"]).entry


@pytest.mark.parametrize(("later", "marks"), [
    ("Mara: we closed a few of them, the migration backlog is down to 24 open tickets", True),
    ("Mara: the migration backlog grew to 300 open tickets after the import", True),  # 30 is not in 300
    ("Mara: the migration backlog still has 30 open tickets, nobody touched it", False),  # the same value
    ("Mara: the migration backlog is a mess, honestly, I dread opening it", False),  # no figure
    ("Mara: the sprint review moved to Thursday, 3 designers are coming", False),  # another thing
])
def test_a_later_window_of_the_same_chat_outdates_a_fact_only_with_another_value(later: str, marks: bool) -> None:
    """The consolidator's outdated mark follows the same rule within a chat: a later window holding what the fact
    is about and another figure outdates it; the same figure, no figure, or other things do not."""
    stated = fact("30", "Mara's migration backlog has 30 open tickets (stated 9 June 2025)")
    episode = said("later", 1.0, 40, later).entry
    assert outdated.restates(stated, episode, Reader(SPARSE)) is marks


def test_the_words_with_digits_a_fact_says_are_no_new_value() -> None:
    """"p95" names what is measured: a later window about the p95 latency dashboard states no new latency, and
    the same amount written without its thousands separator is the same value."""
    latency = said("f", 1.0, 0, "the checkout p95 latency is 850 ms (stated 9 June 2025)", kind="fact",
                   attribute="measure:checkout p95 latency", value="850 ms", source_turn_ids=["1"]).entry
    dashboard = said("later", 1.0, 30, "Mara: the checkout p95 latency dashboard is broken again").entry
    assert not outdated.restates(latency, dashboard, Reader(SPARSE))
    budget = fact("42,000", "the grant budget is 42,000 euros (stated 9 June 2025)")
    again = said("later", 1.0, 30, "Ilse: the grant budget stays at 42000 euros, as agreed").entry
    assert not outdated.restates(budget, again, Reader(SPARSE))


def test_a_fact_without_a_figure_or_date_is_not_outdated_within_a_chat() -> None:
    """A name or a state cannot be told from talk about it this way: left to the hours-apart rule."""
    lives = said("f", 1.0, 0, "Lena lives in Lisbon (stated 9 June 2025)", kind="fact", attribute="lives_in",
                 value="Lisbon", source_turn_ids=["1"]).entry
    episode = said("later", 1.0, 40, "Lena: I love living by the sea, the light here is different").entry
    assert not outdated.restates(lives, episode, Reader(SPARSE))


@pytest.mark.parametrize(("value", "kind"), [("24", "figure"), ("3 March 2025", "date"), ("Lisbon", None),
                                             ("十八万元", "figure"), ("2025年3月9日", "date")])
def test_a_claims_value_has_a_kind(value: str, kind: str | None) -> None:
    """A claim's value is a figure, a date (which holds digits too: the date wins) or neither, in both languages."""
    assert kind_of(value) == kind
