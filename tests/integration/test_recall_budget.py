"""Recall by budget, the second hop and time order on the plain-function path (real embedder, real store): a budget
alone packs the best entries that fit and says what did not; a question about the order of events gets a dated
timeline, oldest first; a link from a first hit brings an entry the query alone did not reach; `explain` shows the
one plan every step used; entries after the best few are cut to the turns the question is about."""
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from engram_client.contract import RecallRequest, RecallResponse
from shared.ingest import windows
from shared.ingest.writer import memorize
from shared.retrieval import recall
from shared.retrieval.render import TIMELINE_HEADER
from shared.text import tokens
from tests.support.ids import unique
from tests.support.plain import Memory
from tests.support.turns import conversation

START = datetime(2023, 3, 1, 10, 0, tzinfo=UTC)
# Mia's year, one short chat a month: the events an ordering question asks about are in different sessions.
SESSIONS = [
    [("Mia", "I finally adopted a cat from the shelter, a grey tabby called Pixel."), ("Jo", "Pixel! Love it.")],
    [("Mia", "Big news: I signed the lease on a flat in Graz, moving next month."), ("Jo", "Graz, wow.")],
    [("Mia", "First week at the new job at the observatory, the telescopes are huge."), ("Jo", "Dream job!")],
    [("Mia", "Pixel learned to open the fridge, I had to buy a child lock."), ("Jo", "Clever cat.")],
    [("Mia", "I ran my first half marathon along the Mur river, 2 hours 5 minutes."), ("Jo", "Amazing time.")],
    [("Mia", "My sister Lea visited Graz and we hiked the Schöckl together."), ("Jo", "Nice hike.")],
]


async def store_sessions(memory: Memory, tenant: str, user: str = "u1") -> list[str]:
    """Each session a conversation of its own, a month apart; returns their ids, oldest first."""
    ids = []
    for i, lines in enumerate(SESSIONS):
        conversation_id = f"s{i}"
        turns = conversation(lines, conversation_id=conversation_id, start=START + timedelta(days=30 * i),
                             user_id=user)
        await memorize(memory.writer, windows.split(tenant, turns, 2))
        ids.append(conversation_id)
    return ids


async def test_a_budget_alone_packs_the_best_entries_that_fit_and_says_what_did_not(memory: Memory) -> None:
    """With a budget and no k, recall returns every entry that fits (more than the default 10 when they are short),
    within the budget; a small budget keeps the best and counts the relevant rest (`left_out`, with its tokens); k
    given too only caps; the recent turns asked for keep their room beside the packed entries."""
    tenant = unique("t")
    lines = [("Mia", f"Note {i}: the observatory dome number {i} opened at {i} pm.") for i in range(24)]
    await memorize(memory.writer, windows.split(tenant, conversation(lines, user_id="u1"), 1))
    query = "When did the observatory domes open?"
    roomy = await recall(memory.retrieval, tenant, RecallRequest(query=query, token_budget=4000))
    assert len(roomy.entries) > 10 and roomy.context_tokens <= 4000
    assert roomy.left_out == 0
    tight = await recall(memory.retrieval, tenant, RecallRequest(query=query, token_budget=150))
    assert 0 < len(tight.entries) < len(roomy.entries) and tight.context_tokens <= 150
    assert tight.left_out > 0 and tight.left_out_tokens > 0
    assert tight.entries[0].id == roomy.entries[0].id  # the best entry first within any budget
    capped = await recall(memory.retrieval, tenant, RecallRequest(query=query, token_budget=4000, k=3))
    assert len(capped.entries) == 3
    default = await recall(memory.retrieval, tenant, RecallRequest(query=query))
    assert len(default.entries) == 10
    recent = conversation([("Mia", "Right now the dome is closed for repairs.")], conversation_id="live")
    with_recent = await recall(memory.retrieval, tenant, RecallRequest(
        query=query, token_budget=300, include_working_memory=True), working_memory=recent)
    assert "Recent turns:" in with_recent.context and with_recent.context_tokens <= 300  # entries leave it room
    assert with_recent.entries


async def test_a_question_about_order_gets_a_dated_timeline_oldest_first(memory: Memory) -> None:
    """"Which came first" and "先…还是先…" get the entries oldest first under a timeline header, each dated by its
    turns' times (kept per entry); the same question without asking for order gets the same entries by relevance."""
    tenant = unique("t")
    ids = await store_sessions(memory, tenant)
    ordered = await recall(memory.retrieval, tenant, RecallRequest(
        query="Which came first: Mia adopting Pixel, the Graz lease, or the observatory job?", token_budget=2000,
        explain=True))
    times = [min(e.turn_times) for e in ordered.entries]
    assert times == sorted(times) and all(e.turn_times for e in ordered.entries)
    assert ordered.context.startswith(TIMELINE_HEADER)
    held = [e.conversation_id for e in ordered.entries]
    assert {"s0", "s1", "s2"} <= set(held)
    assert held.index("s0") < held.index("s1") < held.index("s2"), held
    assert ordered.plan is not None and ordered.plan.sequence == "came first"
    assert all(any("oldest first" in why for why in e.explanation.ordering) for e in ordered.entries
               if e.explanation)
    relevance = await recall(memory.retrieval, tenant, RecallRequest(
        query="Mia adopting Pixel, the Graz lease, the observatory job", token_budget=2000))
    assert not relevance.context.startswith(TIMELINE_HEADER)
    zh = await recall(memory.retrieval, tenant, RecallRequest(query="Mia是先领养了Pixel还是先签了Graz的租约？",
                                                              token_budget=2000))
    assert zh.context.startswith(TIMELINE_HEADER)
    assert [min(e.turn_times) for e in zh.entries] == sorted(min(e.turn_times) for e in zh.entries)
    assert ids[0] == "s0"


async def test_explain_shows_the_one_plan_and_which_hop_brought_each_entry(memory: Memory) -> None:
    """`explain` shows the plan recall used (language, names, the time asked about, the limit, the candidates); an
    entry the query alone does not reach (it shares none of its words and is outranked by forty near misses) comes
    by the second hop, from the person its first hit names, and says so (`hop` 2, `via`)."""
    tenant = unique("t")
    near_misses = [("Mia", f"I walked past market stall {i} selling oranges and flowers, nothing to buy.")
                   for i in range(40)]
    await memorize(memory.writer, windows.split(tenant, conversation(near_misses, conversation_id="stalls"), 1))
    await memorize(memory.writer, windows.split(tenant, conversation(
        [("Mia", "At the flea market I bought a brass lamp from Teodoro Quaresma.")], conversation_id="market"), 1))
    await memorize(memory.writer, windows.split(tenant, conversation(
        [("Jo", "Teodoro Quaresma restores furniture in a workshop near the cathedral.")], conversation_id="later",
        start=START + timedelta(days=40)), 1))
    query = "What did Mia buy at the flea market?"
    # k = 10: 20 candidates of 42 entries; the near misses tie, and which of them rank 9th to 11th depends on
    # their ids (the tenant's name): k = 15 shows the hop whatever the ties.
    # The second hop alone: the forty near misses, one walk a minute apart, are windows next to each other, and
    # raised by one another (recall._smooth) they outrank the entry the second hop brings.
    hop_alone = replace(memory.retrieval, settings=memory.retrieval.settings.model_copy(
        update={"neighbor_weight": 0.0}))
    reply = await recall(hop_alone, tenant, RecallRequest(query=query, k=15, explain=True))
    plan = reply.plan
    assert plan is not None and plan.language == "en" and "Mia" in plan.names and plan.orientation == "event"
    assert (plan.limit, plan.candidates, plan.token_budget, plan.sequence) == (15, 30, None, None)
    by_conversation = {e.conversation_id: e.explanation for e in reply.entries if e.explanation}
    assert reply.entries[0].conversation_id == "market" and by_conversation["market"].hop == 1
    later = by_conversation["later"]
    assert later.hop == 2 and plan.second_hop >= 1
    assert any("teodoro quaresma" in why for why in later.via), later.via
    assert later.dense_rank is None and later.sparse_rank is None  # ranked by another search than the first pass
    # The market entry came by the query; only the forty interchangeable near misses may come by the second hop too
    # (which of them the first pass's cut reached depends on ties, which the tenant's name decides).
    assert by_conversation["market"].hop == 1 and not by_conversation["market"].via
    others = [(e.conversation_id, e.explanation) for e in reply.entries if e.explanation]
    assert all(x.hop == 1 and not x.via for c, x in others if c not in ("later", "stalls")), others
    assert tokens.count(reply.context) == reply.context_tokens


async def test_a_budget_holds_more_of_what_the_question_is_about_as_excerpts(memory: Memory) -> None:
    """Asked what Ana did, within a budget, the entries after the best few are cut to Ana's turns: each says it is
    an excerpt, reports only Ana's turns and holds no line of Bo's, and the budget then holds more of Ana's turns
    than whole entries do; with excerpts off every entry is whole."""
    tenant = unique("t")
    lines = []
    for i in range(12):
        lines += [("Ana", f"On trip {i} I hiked up peak number {i} and camped by lake {i}."),
                  ("Bo", f"That sounds like a wonderful hike, tell me more about the lake number {i} and the weather.")]
    turns = conversation(lines, user_id="u1")
    await memorize(memory.writer, windows.split(tenant, turns, 4))
    said_by = {t.turn_id: t.speaker for t in turns}
    request = RecallRequest(query="Which peaks has Ana hiked?", token_budget=400)
    cut = await recall(memory.retrieval, tenant, request)
    excerpts = [e for e in cut.entries if e.excerpt]
    assert excerpts and not cut.entries[0].excerpt and cut.context_tokens <= 400
    for entry in excerpts:
        assert {said_by[t] for t in entry.source_turn_ids} == {"Ana"} and "Bo:" not in entry.text
        assert len(entry.turn_times) == len(entry.source_turn_ids)
    whole_only = replace(memory.retrieval, settings=memory.retrieval.settings.model_copy(update={"excerpts": False}))
    whole = await recall(whole_only, tenant, request)
    assert not any(e.excerpt for e in whole.entries)

    def anas(reply: RecallResponse) -> set[str]:
        return {t for e in reply.entries for t in e.source_turn_ids if said_by[t] == "Ana"}

    assert len(anas(cut)) > len(anas(whole))


async def test_a_question_in_the_users_voice_is_cut_to_the_users_turns(memory: Memory) -> None:
    """An assistant chat, stored by the writer (each turn's role kept): asked "which peaks did I hike?" within a
    budget, the entries after the best few hold only the user's turns, and the budget holds more of them than whole
    entries do; `explain` shows the plan read the question as about the user's turns. Asked what the assistant
    said, nothing is cut by role."""
    tenant = unique("t")
    said = []
    for i in range(12):
        said += [("Ana", f"On trip {i} I hiked up peak number {i} and camped by lake {i}."),
                 ("Assistant", f"Peak {i} is a classic. For the next trip, pack layers, start before dawn, carry two "
                               f"litres of water and check the forecast for lake {i}, storms build by noon.")]
    turns = [t.model_copy(update={"role": "assistant" if t.speaker == "Assistant" else "user"})
             for t in conversation(said, user_id="u1")]
    await memorize(memory.writer, windows.split(tenant, turns, 4))
    role_of = {t.turn_id: t.role for t in turns}
    request = RecallRequest(query="Which peaks did I hike?", token_budget=400, explain=True)
    mine = await recall(memory.retrieval, tenant, request)
    assert mine.plan is not None and mine.plan.roles == ["user"]
    excerpts = [e for e in mine.entries if e.excerpt]
    assert excerpts and mine.context_tokens <= 400
    for entry in excerpts:
        assert {role_of[t] for t in entry.source_turn_ids} == {"user"} and "Assistant:" not in entry.text
    whole_only = replace(memory.retrieval, settings=memory.retrieval.settings.model_copy(update={"excerpts": False}))
    whole = await recall(whole_only, tenant, request)

    def users(reply: RecallResponse) -> set[str]:
        return {t for e in reply.entries for t in e.source_turn_ids if role_of[t] == "user"}

    assert len(users(mine)) > len(users(whole))
    yours = await recall(memory.retrieval, tenant, RecallRequest(
        query="What did you tell me to pack for the peaks?", token_budget=400, explain=True))
    assert yours.plan is not None and yours.plan.roles == [] and not any(e.excerpt for e in yours.entries)
