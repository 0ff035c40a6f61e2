"""The plain-function path: windows are compressed, embedded and stored, then recalled by meaning and by words."""
import dataclasses
from datetime import UTC, datetime

from engram_client.contract import RecallFilters, RecallRequest
from shared.ingest import windows
from shared.ingest.writer import memorize
from shared.retrieval import recall
from tests.support.ids import unique
from tests.support.plain import Memory
from tests.support.turns import conversation

CHAT = [
    ("Ana", "I moved to Lisbon in May, the light there is unbelievable."),
    ("Bo", "Lisbon! Did you find a flat near the river?"),
    ("Ana", "Yes, in Alfama, a small place with a balcony."),
    ("Bo", "Lovely. I started learning the cello last week."),
    ("Ana", "The cello? That's a big instrument to carry around."),
    ("Bo", "It is, my teacher Marta lends me hers for practice."),
    ("Ana", "My sister is getting married next month in Porto."),
    ("Bo", "Congratulations to her! Are you in the wedding party?"),
]


async def store_chat(memory: Memory, tenant: str, lines: list[tuple[str, str]] = CHAT, size: int = 2,
                     conversation_id: str = "c1", user_id: str = "u1") -> None:
    turns = conversation(lines, conversation_id=conversation_id, user_id=user_id)
    await memorize(memory.writer, windows.split(tenant, turns, size))


async def test_stored_windows_are_recalled_by_meaning(memory: Memory) -> None:
    """Stored windows come back first for questions that share their meaning, with a context block, its token count
    and search timings."""
    tenant = unique("t")
    await store_chat(memory, tenant)
    reply = await recall(memory.retrieval, tenant, RecallRequest(query="Where does Ana live now?", k=3))
    assert "Lisbon" in reply.entries[0].text
    assert reply.context.startswith("Memories") and reply.context_tokens > 0
    assert reply.timings_ms.total >= reply.timings_ms.search > 0
    instrument = await recall(memory.retrieval, tenant, RecallRequest(query="What instrument is Bo learning?", k=1))
    assert "cello" in instrument.entries[0].text


async def test_recall_never_crosses_tenants(memory: Memory) -> None:
    """A recall returns only the asking tenant's entries, even when another tenant's entries match the query better."""
    mine, theirs = unique("t"), unique("t")
    await store_chat(memory, theirs)
    await store_chat(memory, mine, [("Ana", "I adopted a cat named Pixel."), ("Bo", "Cute!")])
    reply = await recall(memory.retrieval, mine, RecallRequest(query="Where does Ana live? Lisbon?", k=10))
    assert reply.entries and all("Pixel" in e.text for e in reply.entries)


async def test_user_and_conversation_scope(memory: Memory) -> None:
    """A user_id or conversation_id on the request limits recall to that user's or that conversation's entries."""
    tenant = unique("t")
    await store_chat(memory, tenant, conversation_id="c1", user_id="u1")
    await store_chat(memory, tenant, [("Cy", "I live in Lisbon too, near the castle.")], conversation_id="c2",
                     user_id="u2")
    reply = await recall(memory.retrieval, tenant, RecallRequest(query="Who lives in Lisbon?", user_id="u2"))
    assert [e.conversation_id for e in reply.entries] == ["c2"]
    reply = await recall(memory.retrieval, tenant, RecallRequest(query="Lisbon", conversation_id="c1"))
    assert {e.conversation_id for e in reply.entries} == {"c1"}


async def test_relative_dates_are_stored_absolute_and_time_filters_apply(memory: Memory) -> None:
    """A relative date in a turn is stored with its absolute date beside it, and the since and persons filters drop
    or keep entries by them."""
    tenant = unique("t")
    await store_chat(memory, tenant)
    reply = await recall(memory.retrieval, tenant, RecallRequest(query="When did Bo start learning the cello?", k=2))
    assert any("last week (the week of 1 May 2023)" in e.text for e in reply.entries)
    later = RecallFilters(since=datetime(2024, 1, 1, tzinfo=UTC))
    assert (await recall(memory.retrieval, tenant, RecallRequest(query="cello", filters=later))).entries == []
    people = RecallFilters(persons=["Marta"])
    found = await recall(memory.retrieval, tenant, RecallRequest(query="music", filters=people))
    assert len(found.entries) == 1 and "Marta" in found.entries[0].persons


async def test_token_budget_is_respected(memory: Memory) -> None:
    """Whatever the token budget (15, 60 or 200), the context is not empty and never counts more tokens than the
    budget."""
    tenant = unique("t")
    await store_chat(memory, tenant)
    for budget in (15, 60, 200):
        reply = await recall(memory.retrieval, tenant, RecallRequest(query="Ana", token_budget=budget))
        assert 0 < reply.context_tokens <= budget
        assert reply.entries


async def test_explain_says_why_each_entry_matched(memory: Memory) -> None:
    """With explain, the top entry carries its dense and sparse ranks, matched terms, tenant filter and person boost;
    without it, none."""
    tenant = unique("t")
    await store_chat(memory, tenant)
    reply = await recall(memory.retrieval, tenant,
                         RecallRequest(query="Is Ana's sister marrying in Porto?", k=2, explain=True))
    top = reply.entries[0]
    assert top.explanation is not None
    assert "Porto" in top.text
    assert top.explanation.dense_rank is not None and top.explanation.sparse_rank is not None
    assert {"sister", "porto"} <= set(top.explanation.matched_terms)
    assert f"tenant = {tenant}" in top.explanation.filters
    assert any("Ana" in b for b in top.explanation.boosts)
    plain = await recall(memory.retrieval, tenant, RecallRequest(query="Porto", k=1))
    assert plain.entries[0].explanation is None


async def test_a_person_the_query_names_raises_their_entries_however_it_is_cased(memory: Memory) -> None:
    """A person the query names, in any casing or possessive form, boosts exactly the entries about that person and
    puts one first."""
    tenant = unique("t")
    await store_chat(memory, tenant)
    for query in ("what does marta do?", "What does MARTA do?", "Marta's hobby?"):
        reply = await recall(memory.retrieval, tenant, RecallRequest(query=query, k=4, explain=True))
        raised = [e for e in reply.entries if e.explanation and any(
            b.startswith("person named in query") for b in e.explanation.boosts)]
        assert [e.persons for e in raised] == [e.persons for e in reply.entries if "Marta" in e.persons]
        assert raised and raised[0] == reply.entries[0] and "Marta" in reply.entries[0].persons


async def test_diversity_and_smoothing_reorder_the_boosted_candidates(memory: Memory) -> None:
    """With MMR diversity and neighbour smoothing on, recall still returns k distinct entries, the person-boosted
    entry among them."""
    tenant = unique("t")
    await store_chat(memory, tenant, size=1)
    tuned = dataclasses.replace(memory.retrieval, settings=memory.retrieval.settings.model_copy(
        update={"mmr_lambda": 0.5, "neighbor_weight": 0.3}))
    reply = await recall(tuned, tenant, RecallRequest(query="what does marta lend?", k=3, explain=True))
    assert len(reply.entries) == 3 and len({e.id for e in reply.entries}) == 3
    assert any("Marta" in e.persons for e in reply.entries)
    lent = next(e for e in reply.entries if "Marta" in e.persons)
    assert lent.explanation is not None and any("Marta" in b for b in lent.explanation.boosts)


async def test_deep_mode_without_an_llm_answers_as_fast_and_says_so(memory: Memory) -> None:
    """Without an LLM, a deep recall returns the fast recall's entries and reports it stopped for no_model after zero
    rounds."""
    tenant = unique("t")
    await store_chat(memory, tenant, size=1)
    request = RecallRequest(query="what does marta lend?", k=3, explain=True)
    fast = await recall(memory.retrieval, tenant, request)
    deep = await recall(memory.retrieval, tenant, request.model_copy(update={"mode": "deep"}))
    assert [e.id for e in deep.entries] == [e.id for e in fast.entries]
    assert deep.deep is not None and deep.deep.stopped == "no_model" and deep.deep.rounds == 0
    assert fast.deep is None


async def test_chinese_question_finds_its_entry_by_dense_and_by_sparse_search(memory: Memory) -> None:
    """A Chinese question ranks its entry first by dense search alone and by BM25 alone, and the entry carries its
    absolute date."""
    tenant = unique("t")
    lines = [
        ("李雷", "我昨天去了北京的一家咖啡馆，拿铁特别好喝。"),
        ("韩梅梅", "真好！你在北京待几天？"),
        ("李雷", "下周五我要去上海参加一个机器学习会议。"),
        ("韩梅梅", "我最近在学弹钢琴，每天练一个小时。"),
        ("李雷", "我的猫生病了，明天带它去看兽医。"),
        ("韩梅梅", "希望它早日康复，我家的狗也很调皮。"),
    ]
    await store_chat(memory, tenant, lines, size=2)
    question = RecallRequest(query="李雷在北京的咖啡馆喝了什么？", k=3, explain=True)
    reply = await recall(memory.retrieval, tenant, question)
    top = reply.entries[0]
    assert "咖啡馆" in top.text and "2023年5月7日" in top.text
    assert top.explanation is not None
    assert top.explanation.dense_rank == 1, "dense search alone should rank the coffee entry first"
    assert top.explanation.sparse_rank == 1, "BM25 alone should rank the coffee entry first"
    piano = await recall(memory.retrieval, tenant, RecallRequest(query="谁在学钢琴？", k=1, explain=True))
    assert "钢琴" in piano.entries[0].text
    assert piano.entries[0].explanation is not None and piano.entries[0].explanation.sparse_rank == 1


async def test_currency_measures_the_band_without_what_the_windows_beside_a_match_added(memory: Memory) -> None:
    """Through recall as shipped: asked where Lena lives now, the windows of the old chat raise one another (the
    windows beside a match), and currency says it measured their relevance without that (recall.search passes the
    lifts on to currency); the newer window about Graz comes first."""
    tenant = unique("t")
    old = [("Lena", "We live in Vienna now, in a flat near the Prater with a view of the wheel."),
           ("Sam", "Vienna suits you, the coffee houses alone are worth living there."),
           ("Lena", "We love Vienna, the trams and the parks make living there easy."),
           ("Sam", "I would live in Vienna too if I could find a flat like yours.")]
    await memorize(memory.writer, windows.split(tenant, conversation(old, conversation_id="vienna"), 1))
    await memorize(memory.writer, windows.split(tenant, conversation(
        [("Lena", "We finally moved to Graz last month, so we live near the university and the river now.")],
        conversation_id="graz", start=datetime(2024, 6, 1, 10, 0, tzinfo=UTC)), 1))
    reply = await recall(memory.retrieval, tenant, RecallRequest(query="Where does Lena live now?", k=5,
                                                                 explain=True))
    assert reply.entries[0].conversation_id == "graz"
    reasons = [why for e in reply.entries if e.explanation for why in e.explanation.ordering]
    assert any("(without the windows beside a match)" in why for why in reasons), reasons
    assert any(why.startswith("the window next to it matched") for e in reply.entries if e.explanation
               for why in e.explanation.boosts)
