"""Consolidation through NATS with the real store: facts that stay current, duplicates merged, small talk fading,
profiles, and runs that change nothing the second time."""
import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from engram_client import MemoryClient
from engram_client.contract import EntryView
from services.stack import Running
from shared.store import EntryFilter, Scope
from tests.support.ids import unique
from tests.support.memory import memory_without_ids, store_all
from tests.support.polling import eventually
from tests.support.turns import conversation

MAY = datetime(2024, 5, 6, 10, 0, tzinfo=UTC)
SEPTEMBER = datetime(2024, 9, 2, 10, 0, tzinfo=UTC)
BEFORE = [("Ana", "I live in Lisbon, close to the river."), ("Bo", "Lisbon is lovely."),
          ("Ana", "I work at Google as a designer."), ("Bo", "Nice team."),
          ("Ana", "I have a dog named Rex."), ("Bo", "Rex is a great name.")]
AFTER = [("Ana", "Big news: I moved to Porto last month."), ("Bo", "Porto, wow!"),
         ("Ana", "And I work at Spotify now, started in August."), ("Bo", "Congratulations!"),
         ("Ana", "Sadly Rex died in June, and we adopted a dog named Luna."), ("Bo", "Luna sounds sweet.")]


async def facts(client: MemoryClient, user_id: str) -> list[EntryView]:
    return (await client.entries(op="list", user_id=user_id, kind="fact", limit=500)).entries


def current(views: list[EntryView]) -> dict[str, str]:
    return {v.attribute or "": v.value or "" for v in views if v.superseded_by is None}


def snapshot(views: list[EntryView]) -> list[dict[str, Any]]:
    return sorted((v.model_dump(mode="json", exclude={"id"}) for v in views), key=json.dumps)


async def everything(client: MemoryClient, user_id: str) -> list[EntryView]:
    return (await client.entries(op="list", user_id=user_id, limit=500)).entries


async def test_a_move_a_new_job_and_a_new_pet_leave_only_the_current_values(client: MemoryClient) -> None:
    """After consolidation, recall offers only the current home, job and pet as facts, the old ones come back only
    with include_superseded, and history chains the old value to the new."""
    await store_all(client, conversation(BEFORE, "s1", MAY, user_id="ana") +
                    conversation(AFTER, "s2", SEPTEMBER, user_id="ana"))
    summary = await client.consolidate()
    assert summary.owners == 1

    views = await facts(client, "ana")
    now = current(views)
    assert now["lives_in"] == "Porto" and now["works_at"] == "Spotify" and now["pet:dog"] == "Luna", now
    for question, stale, fresh in [("Where does Ana live?", "Lisbon", "Porto"),
                                   ("Where does Ana work?", "Google", "Spotify"),
                                   ("What is the name of Ana's dog?", "Rex", "Luna")]:
        recalled = await client.recall(question, user_id="ana", k=10)
        recalled_facts = [e.text for e in recalled.entries if e.kind == "fact"]
        assert any(fresh in t for t in recalled_facts), (question, recalled_facts)
        assert not any(stale in t for t in recalled_facts), (question, recalled_facts)
        assert {e.kind for e in recalled.entries} >= {"fact", "episodic"}
        with_history = await client.recall(question, user_id="ana", k=20, include_superseded=True)
        assert any(stale in e.text for e in with_history.entries if e.kind == "fact")

    old = next(v for v in views if v.attribute == "lives_in" and v.value == "Lisbon")
    assert old.superseded_by and old.valid_to is not None and old.valid_to.date() == SEPTEMBER.date()
    chain = (await client.entries(op="history", ids=[old.id])).entries
    assert [v.value for v in chain] == ["Lisbon", "Porto"]


async def test_statements_published_in_any_order_give_the_same_current_facts(stack: Running) -> None:
    """The same dated statements published in three different orders leave the same facts, superseded or current,
    with the latest home current."""
    statements = [("Ana", "I live in Lisbon."), ("Ana", "I moved to Porto."), ("Ana", "I moved to Madrid."),
                  ("Ana", "I work at Google."), ("Ana", "I work at Spotify now."), ("Ana", "I'm allergic to peanuts.")]
    turns = [t for i, line in enumerate(statements)
             for t in conversation([line], f"c{i}", MAY + timedelta(days=30 * i), user_id="ana")]
    results = []
    for seed in (1, 2, 3):
        shuffled = random.Random(seed).sample(turns, len(turns))
        async with await MemoryClient.connect(stack.nats_url, unique("t")) as client:
            await store_all(client, shuffled)
            await client.consolidate()
            views = await facts(client, "ana")
            results.append(({(v.attribute, v.value, v.superseded_by is None) for v in views}, current(views)))
    assert results[0][1] == {"lives_in": "Madrid", "works_at": "Spotify", "allergy:peanut": "allergic"} \
        or results[0][1]["lives_in"] == "Madrid", results[0]
    assert results[0] == results[1] == results[2]


async def test_duplicates_from_different_conversations_merge_keeping_every_source(client: MemoryClient,
                                                                                  stack: Running) -> None:
    """A conversation repeated under another id is merged into one episode holding every source turn, announced,
    hidden from recall but still found in its own conversation and in history."""
    lines = [("Ana", "We booked the cabin by Lake Bled for the first week of July."),
             ("Bo", "The one with the wooden sauna and the rowing boat?"),
             ("Ana", "Yes, and Mia is bringing her guitar for the evenings."),
             ("Bo", "Perfect, I will bring the board games.")]
    first = conversation(lines, "web-1", MAY, user_id="ana")
    again = [t.model_copy(update={"conversation_id": "app-7", "turn_id": f"app-7-{i}"}) for i, t in enumerate(first)]
    await store_all(client, first + again)
    events = await client._nc.subscribe(f"mem.{client.tenant}.events.entries_merged")

    summary = await client.consolidate()

    assert summary.merged == 1, summary
    episodes = (await client.entries(op="list", user_id="ana", kind="episodic")).entries
    kept = [v for v in episodes if v.merged_into is None]
    gone = [v for v in episodes if v.merged_into is not None]
    assert len(kept) == 1 and len(gone) == 1 and gone[0].merged_into == kept[0].id
    assert set(kept[0].source_turn_ids) == {t.turn_id for t in first + again}
    assert kept[0].merged_from == [gone[0].id]
    recalled = await client.recall("Who brings the guitar to Lake Bled?", user_id="ana")
    assert [e.id for e in recalled.entries if e.kind == "episodic"] == [kept[0].id]
    announced = json.loads((await events.next_msg(timeout=5)).data)
    assert announced["kept_id"] == kept[0].id and announced["merged_ids"] == [gone[0].id]
    # Scoped to the absorbed entry's own conversation (its keeper is in the other one), it is still found.
    scoped = await client.recall("Who brings the guitar to Lake Bled?", user_id="ana",
                                 conversation_id=gone[0].conversation_id)
    assert [e.id for e in scoped.entries if e.kind == "episodic"] == [gone[0].id]
    history = (await client.entries(op="history", ids=[kept[0].id])).entries
    assert {v.id for v in history} == {kept[0].id, gone[0].id}
    # Nothing was deleted: the absorbed entry is still there, hidden.
    assert await stack.store.count(Scope(tenant_id=client.tenant, user_id="ana"),
                                   EntryFilter(kinds=["episodic"])) == 2


async def test_old_small_talk_fades_while_an_old_allergy_stays(client: MemoryClient) -> None:
    """Consolidation forgets year-old small talk, announcing it as low_retention, while an equally old allergy stays
    as a fact and an episode."""
    long_ago = SEPTEMBER - timedelta(days=400)
    chatter = conversation([("Ana", "hey"), ("Bo", "hi!"), ("Ana", "lol ok"), ("Bo", "haha same")],
                           "old-chat", long_ago, user_id="ana")
    allergy = conversation([("Ana", "I'm allergic to peanuts, badly."), ("Bo", "Good to know."),
                            ("Ana", "Even a trace sends me to hospital."), ("Bo", "I'll check every label.")],
                           "old-allergy", long_ago + timedelta(hours=1), user_id="ana")
    recent = conversation([("Ana", "We are planning the wedding menu for October with the caterer Marta."),
                           ("Bo", "Marta suggested the seafood risotto and a lemon tart."),
                           ("Ana", "Then we send the guest list to Marta by Friday."),
                           ("Bo", "I will write the list tonight.")], "recent", SEPTEMBER, user_id="ana")
    await store_all(client, chatter + allergy + recent)
    chatter_ids = {t.turn_id for t in chatter}
    events = await client._nc.subscribe(f"mem.{client.tenant}.events.entries_forgotten")

    summary = await client.consolidate()

    assert summary.forgotten == 1, summary
    left = await everything(client, "ana")
    assert not [v for v in left if set(v.source_turn_ids) & chatter_ids]
    assert any(v.kind == "fact" and v.attribute == "allergy:peanut" for v in left), [v.text for v in left]
    assert any(v.kind == "episodic" and "peanuts" in v.text for v in left)
    announced = json.loads((await events.next_msg(timeout=5)).data)
    assert announced["reason"] == "low_retention" and announced["count"] == 1


async def test_the_profile_gathers_stated_preferences_in_english_and_chinese(client: MemoryClient) -> None:
    """Each user gets a profile of their current facts, recalled by score like any entry, in either language."""
    english = conversation([("Ana", "I love hiking in the mountains."), ("Bo", "Me too."),
                            ("Ana", "I don't like sushi at all."), ("Bo", "More for me."),
                            ("Ana", "I'm allergic to peanuts."), ("Bo", "Noted.")], "en", MAY, user_id="ana")
    chinese = conversation([("小王", "我喜欢爬山。"), ("小李", "我也是。"), ("小王", "我不喜欢吃香菜。"),
                            ("小李", "好的。"), ("小王", "我对花生过敏。"), ("小李", "记住了。")],
                           "zh", MAY, user_id="wang")
    await store_all(client, english + chinese)

    summary = await client.consolidate()

    assert summary.profiles_updated == 2, summary
    for user, query, expected in [("ana", "What do I like and what should I avoid?", ["hiking", "sushi", "peanut"]),
                                  ("wang", "我喜欢什么？", ["爬山", "香菜", "花生"])]:
        recalled = await client.recall(query, user_id=user, explain=True)
        [profile] = [e for e in recalled.entries if e.kind == "profile"]
        assert all(word in profile.text for word in expected), profile.text
        assert profile.text.split("\n")[0] in recalled.context
        # Ranked by score like any entry, and never above the episodes it was read from (derived claim).
        assert recalled.entries.index(profile) > 0, [(e.kind, e.text) for e in recalled.entries]
    # Another user's profile never appears.
    unrelated = await client.recall("weather in the mountains", user_id="zz-nobody")
    assert all(e.kind != "profile" for e in unrelated.entries)


async def test_the_profile_leaves_out_what_no_longer_holds(client: MemoryClient) -> None:
    """A breakup is a fact (history, found by recall) but no line of the profile: it says what stopped, and a new
    partner told in words no rule reads would leave "broke up with Rafael" standing as her state."""
    before = conversation([("Lucía", "My boyfriend is Rafael."), ("Bo", "Nice.")], "s1", MAY, user_id="lucia")
    after = conversation([("Lucía", "Rafael and I broke up in August, it was mutual."), ("Bo", "Sorry to hear."),
                          ("Lucía", "And honestly there's someone new, a marine biologist."), ("Bo", "Exciting!"),
                          ("Lucía", "Also, I'm allergic to peanuts."), ("Bo", "Noted.")], "s2", SEPTEMBER,
                         user_id="lucia")
    await store_all(client, before + after)

    await client.consolidate()

    now = current(await facts(client, "lucia"))
    assert now.get("partner") == "no partner", now
    [profile] = (await client.entries(op="list", user_id="lucia", kind="profile")).entries
    assert "peanut" in profile.text and "Rafael" not in profile.text, profile.text


async def test_a_profile_drops_a_partner_whose_ending_no_rule_read(client: MemoryClient) -> None:
    """Leopoldine, then Kasimir (read, superseding her), then a chat that ends it with Kasimir and goes back to
    Leopoldine in words no rule reads. That chat names Kasimir, which is no restatement (only the rules' reading says
    a fact again): it is evidence about the same thing, so "seeing Kasimir" is marked possibly outdated and no
    profile line states it."""
    first = conversation([("Benedikt", "My girlfriend Leopoldine hates surprises."), ("Bo", "Plan ahead then.")],
                         "s1", MAY, user_id="benedikt")
    second = conversation([("Benedikt", "Leopoldine and I split. I've been seeing Kasimir."), ("Bo", "Big news.")],
                          "s2", SEPTEMBER, user_id="benedikt")
    third = conversation([("Benedikt", "Kasimir and I ended it in may. and Leopoldine and I are giving it another "
                                       "try."), ("Bo", "How does it feel?"),
                          ("Benedikt", "Slower, more honest. I'm allergic to peanuts by the way."), ("Bo", "Noted.")],
                         "s3",
                         SEPTEMBER + timedelta(days=200), user_id="benedikt")
    await store_all(client, first + second + third)

    await client.consolidate()

    found = await facts(client, "benedikt")
    kasimir = [f for f in found if f.value == "Kasimir" and f.superseded_by is None]
    assert kasimir and all(f.outdated_by for f in kasimir), found
    [profile] = (await client.entries(op="list", user_id="benedikt", kind="profile")).entries
    assert "peanut" in profile.text and "Kasimir" not in profile.text, profile.text


async def test_a_new_favourite_leaves_the_old_one_out_of_the_profile(client: MemoryClient) -> None:
    """"My favourite band is Altin Gün", months later "... is Mdou Moctar these days": the profile states only the
    new favourite; the old one is kept as a fact, marked possibly outdated by the newer chat."""
    first = conversation([("Teodor", "My favourite band is Altin Gün."), ("Bo", "Great pick.")], "s1", MAY,
                         user_id="teodor")
    later = conversation([("Teodor", "My favourite band is Mdou Moctar these days."), ("Bo", "Desert blues!")],
                         "s2", SEPTEMBER, user_id="teodor")
    await store_all(client, first + later)

    await client.consolidate()

    old = [f for f in await facts(client, "teodor") if "Altin" in f.text]
    assert old and all(f.outdated_by or f.superseded_by for f in old), old
    [profile] = (await client.entries(op="list", user_id="teodor", kind="profile")).entries
    assert "Mdou Moctar" in profile.text and "Altin" not in profile.text, profile.text


async def settled(client: MemoryClient, runs: int) -> list[dict[str, Any]]:
    """The memory after one more consolidation, having checked that `runs` more change nothing at all."""
    once = snapshot(await everything(client, "ana"))
    for _ in range(runs):
        again = await client.consolidate()
        assert (again.superseded, again.merged, again.forgotten, again.profiles_updated, again.scored) == \
            (0, 0, 0, 0, 0), again
        assert snapshot(await everything(client, "ana")) == once
    return once


async def test_one_run_and_ten_runs_give_the_same_memory(client: MemoryClient) -> None:
    """Nine more consolidation runs after the first change nothing: every count is zero and the memory equals the one
    the first run left."""
    lines = [("Ana", "hey"), ("Bo", "hi"), ("Ana", "lol"), ("Bo", "ok")]
    turns = (conversation(BEFORE, "s1", MAY, user_id="ana") + conversation(AFTER, "s2", SEPTEMBER, user_id="ana")
             + conversation(lines, "s0", MAY - timedelta(days=500), user_id="ana")
             + [t.model_copy(update={"conversation_id": "dup", "turn_id": f"dup-{i}"})
                for i, t in enumerate(conversation(AFTER, "s2", SEPTEMBER, user_id="ana"))])
    await store_all(client, turns)
    first = await client.consolidate()
    assert first.merged and first.forgotten and first.profiles_updated, first
    once = await settled(client, 9)
    assert any(v["superseded_by"] for v in once)  # (superseded as the facts were written)


async def test_runs_settle_and_agree_across_tenants_when_the_profile_repeats_its_facts(stack: Running) -> None:
    """A short story told one line a chat, and twice more in one chat each, stored in six tenants: in each the second
    run changes nothing, and all six end with the same memory. (The outdated marks once counted BM25's IDF over the
    profile too, which the marks shape, so they flipped on every run; and the engine breaks ties by id, which
    embeds the tenant, so the same story got a different profile in about half the tenants.)"""
    lines = [("Ana", "I live in Lisbon."), ("Bo", "Nice."), ("Ana", "I work at Google."), ("Bo", "Cool."),
             ("Ana", "I moved to Porto."), ("Bo", "Wow."), ("Ana", "I love hiking."), ("Bo", "Same.")]
    turns = [t for i, line in enumerate(lines)
             for t in conversation([line], f"c{i}", MAY + timedelta(days=20 * i), user_id="ana")]
    for name, at in (("again", MAY), ("twice", MAY + timedelta(hours=2))):
        turns += [t.model_copy(update={"conversation_id": name, "turn_id": f"{name}-{i}"})
                  for i, t in enumerate(conversation(lines, "x", at, user_id="ana"))]
    memories = []
    for _ in range(6):
        async with await MemoryClient.connect(stack.nats_url, unique("tenant")) as client:
            await store_all(client, turns)
            await client.consolidate()
            memories.append(memory_without_ids(await everything(client, "ana")))
            await settled(client, 2)
    assert all(m == memories[0] for m in memories), [[e for e in m if e[0] == "profile"] for m in memories]


async def test_a_recalled_entry_records_its_use(client: MemoryClient, stack: Running) -> None:
    """An entry a recall returned has its access count and last-accessed time recorded once the usage is flushed."""
    await store_all(client, conversation(BEFORE, "s1", MAY, user_id="ana"))
    recalled = await client.recall("Where does Ana live?", user_id="ana", k=1)
    [hit] = recalled.entries
    usage = stack.retriever_deps[0].retrieval.usage
    assert usage is not None
    await usage.flush()
    [view] = (await client.entries(op="get", ids=[hit.id])).entries
    assert view.access_count == 1 and view.last_accessed_at is not None
    await eventually(lambda: client.entries(op="get", ids=[hit.id]), lambda r: r.entries[0].access_count >= 1)
