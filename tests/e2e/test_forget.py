"""Forget through NATS: nothing of the subject is left anywhere, and nothing of anyone else is touched (checked)."""
import json

from engram_client import MemoryClient
from engram_client.contract import Turn
from services.stack import Running
from shared.store import MemoryEntry, Scope, all_entries
from tests.support.ids import unique
from tests.support.memory import store_all, stored_turn_ids
from tests.support.polling import eventually
from tests.support.turns import conversation

LINES = [("Ana", "I adopted a grey cat called Miso last week."), ("Bo", "Miso is a lovely name for a cat."),
         ("Ana", "She sleeps on my keyboard every morning."), ("Bo", "Cats always find the warmest spot."),
         ("Ana", "My sister Lena lives in Porto now."), ("Bo", "Porto is beautiful in the spring."),
         ("Ana", "I am allergic to peanuts, so no satay for me."), ("Bo", "Noted, no peanuts at the party.")]


BO_LINES = [("Bo", "Bo here: the garden needs watering twice a day in July."), ("Cy", "Use the long green hose."),
            ("Bo", "The tomatoes finally turned red this week."), ("Cy", "Save me a few for the salad.")]


def of(user: str, conversation_id: str, lines: list[tuple[str, str]] = LINES) -> list[Turn]:
    return conversation(lines, conversation_id=conversation_id, user_id=user)


async def held(stack: Running, tenant: str) -> dict[str, dict[int, Turn]]:
    return await stack.consolidator_deps[0].places.working_memory.held_turns(tenant)


async def test_forgetting_a_user_leaves_nothing_of_theirs_and_everything_else(stack: Running) -> None:
    """Forgetting a user removes their entries, working memory and unwritten turns from store, recall, listings and
    later windows, announces it, and leaves other users and tenants untouched."""
    tenant, other_tenant = unique("t"), unique("t")
    store = stack.store
    async with await MemoryClient.connect(stack.nats_url, tenant) as client, \
            await MemoryClient.connect(stack.nats_url, other_tenant) as other:
        await store_all(client, of("ana", "a1") + of("bo", "b1", BO_LINES))
        await store_all(other, of("ana", "a1"))
        # Still in working memory: an open window of Ana's, and a conversation Ana and Bo share.
        bo_in_m1 = conversation([("Bo", "Bo here: I booked the train to Lyon.")], conversation_id="m1", user_id="bo")
        open_turns = [*of("ana", "a2", LINES[:2]),
                      *conversation([("Ana", "Ana here, about the trip.")], conversation_id="m1", user_id="ana"),
                      bo_in_m1[0].model_copy(update={"turn_id": "m1-bo"})]
        await client.publish_turns(open_turns)
        wanted = {t.turn_id for t in open_turns}
        await eventually(lambda: held(stack, tenant),
                         lambda h: {t.turn_id for c in h.values() for t in c.values()} >= wanted)
        bo_before = await store.count(Scope(tenant_id=tenant, user_id="bo"))
        theirs_before = await store.count(Scope(tenant_id=other_tenant, user_id="ana"))
        ana_ids = {e.id for e in (await store.scroll(Scope(tenant_id=tenant, user_id="ana"), limit=100)).entries}
        assert ana_ids and bo_before and theirs_before

        events = await client._nc.subscribe(f"mem.{tenant}.events.entries_forgotten")
        receipt = await client.forget(user_id="ana")

        assert receipt.verified and receipt.remaining.total == 0, receipt
        assert receipt.deleted.entries == len(ana_ids)
        assert receipt.deleted.turns >= 3 and receipt.deleted.working_memory >= 2  # a2, m1 (and a1's recent turns)
        announced = json.loads((await events.next_msg(timeout=5)).data)
        assert set(announced["entry_ids"]) == ana_ids and announced["reason"] == "forget request"
        # Nothing of Ana's: store, recall, entries listing, working memory.
        assert await store.count(Scope(tenant_id=tenant, user_id="ana")) == 0
        assert (await client.recall("Ana's cat Miso", user_id="ana")).entries == []
        assert (await client.entries(user_id="ana")).entries == []
        assert all(t.user_id != "ana" for c in (await held(stack, tenant)).values() for t in c.values())
        shared = await client.recall("the train", conversation_id="m1", include_working_memory=True)
        assert [t.turn_id for t in shared.working_memory] == ["m1-bo"]
        # Everyone else's, untouched.
        assert await store.count(Scope(tenant_id=tenant, user_id="bo")) == bo_before
        assert await store.count(Scope(tenant_id=other_tenant, user_id="ana")) == theirs_before
        # The shared conversation still closes: Bo's turn is written, Ana's never is.
        await client.flush("m1")
        await eventually(lambda: stored_turn_ids(store, tenant), lambda ids: "m1-bo" in ids, timeout_s=30)
        assert not {t.turn_id for t in open_turns if t.user_id == "ana"} & set(await stored_turn_ids(store, tenant))


async def test_forgetting_a_conversation_or_entries_stays_inside_the_tenant(stack: Running) -> None:
    """A forget of another tenant's entry ids deletes nothing, while a forget of a conversation or of one entry
    deletes exactly that in the asking tenant."""
    tenant, other_tenant = unique("t"), unique("t")
    store = stack.store
    async with await MemoryClient.connect(stack.nats_url, tenant) as client, \
            await MemoryClient.connect(stack.nats_url, other_tenant) as other:
        await store_all(client, of("ana", "c1") + of("ana", "c2"))
        await store_all(other, of("ana", "c1"))
        theirs = (await store.scroll(Scope(tenant_id=other_tenant), limit=100)).entries

        # Another tenant's entry ids, asked from this tenant: nothing is found, nothing is deleted.
        receipt = await client.forget(entry_ids=[e.id for e in theirs])
        assert receipt.deleted.entries == 0 and receipt.verified
        assert await store.count(Scope(tenant_id=other_tenant)) == len(theirs)

        receipt = await client.forget(conversation_id="c1")
        assert receipt.verified and receipt.deleted.entries > 0 and receipt.deleted.working_memory == 1
        assert await store.count(Scope(tenant_id=tenant, conversation_id="c1")) == 0
        assert await stack.consolidator_deps[0].places.working_memory.get(tenant, "c1") is None
        assert await store.count(Scope(tenant_id=tenant, conversation_id="c2")) > 0
        assert await store.count(Scope(tenant_id=other_tenant, conversation_id="c1")) == len(theirs)

        c2 = (await store.scroll(Scope(tenant_id=tenant, conversation_id="c2"), limit=100)).entries
        receipt = await client.forget(entry_ids=[c2[0].id])
        assert receipt.verified and receipt.deleted.entries == 1
        assert [e.id for e in await store.get(Scope(tenant_id=tenant), [e.id for e in c2])] == [e.id for e in c2[1:]]


async def test_a_bad_forget_request_gets_a_clear_error(stack: Running) -> None:
    """A forget request that is empty, not JSON, names both a user and a conversation, or names another tenant gets
    an error reply with the matching code."""
    tenant = unique("t")
    async with await MemoryClient.connect(stack.nats_url, tenant) as client:
        for payload, code in [(b"{}", "invalid_request"), (b"not json", "invalid_request"),
                              (b'{"user_id": "a", "conversation_id": "b"}', "invalid_request"),
                              (b'{"user_id": "a", "tenant_id": "someone_else"}', "forbidden")]:
            reply = await client.raw_request("forget", payload)
            assert reply["error"]["code"] == code, (payload, reply)


def spoken(lines: list[tuple[str, str, str]], conversation_id: str) -> list[Turn]:
    """Turns of (speaker, user id, text), each speaker with their own user id."""
    turns = conversation([(speaker, text) for speaker, _, text in lines], conversation_id=conversation_id)
    return [t.model_copy(update={"user_id": user}) for t, (_, user, _) in zip(turns, lines, strict=True)]


def trace_of(entry: MemoryEntry, texts: list[str], turn_ids: set[tuple[str, str]]) -> list[str]:
    """What of Ana's an entry still holds: a sentence of hers, her speaker id or name, one of her source turns, where
    a turn of hers was in its text."""
    found = [text for text in texts if text.casefold() in " ".join(entry.text.split()).casefold()]
    found += [f"speaker {u}" for u in entry.speaker_ids if u == "ana"] + list(entry.speaker_names.get("ana", ""))[:1]
    found += [f"turn {t}" for t in entry.source_turn_ids if (entry.conversation_id, t) in turn_ids]
    found += [f"turn lines of {s.speaker}" for s in entry.turn_lines if s.speaker == "Ana"]
    return found


async def test_a_user_forgotten_leaves_no_word_in_entries_others_own_and_the_receipt_counts_them(
        stack: Running) -> None:
    """Ana answers in windows Bo opened, is quoted by a later window of Bo's (it opens with a short reply to her), and
    Bo's two near-identical windows holding her words are merged; she also has a conversation of her own. Forgetting
    Ana deletes what is filed under her, writes Bo's episodes again without her turns, and then no entry of the
    tenant, of any kind, superseded and merged-away ones included, holds a sentence of hers, her speaker id or one of
    her turns; Bo's words are all still there; the receipt's deleted and rewritten counts are exactly the entries
    that went and the entries whose text changed."""
    tenant = unique("t")
    marker = unique("velvet")
    ana = [f"Ana here: my locker code at the climbing gym is {marker} and nobody else knows it.",
           "I am moving to Reykjavik in March for a new job at the city aquarium there."]
    bo_opens = [("Bo", "bo", "Bo here, I finally signed up for the pottery course downtown on Tuesdays."),
                ("Ana", "ana", ana[0]), ("Bo", "bo", "I promise I will never tell anyone about that code."),
                ("Ana", "ana", ana[1])]
    bo_quotes = [("Bo", "bo", "Really?"), ("Bo", "bo", "That is very far away from our pottery course."),
                 ("Bo", "bo", "We should plan a farewell dinner with the whole pottery group."),
                 ("Bo", "bo", "I will book the Italian place near the studio for a Friday.")]
    turns = spoken(bo_opens + bo_quotes, "w1") + spoken(bo_opens, "w3")
    turns += spoken([("Ana", "ana", "Ana here again. My cat Miso sleeps on my keyboard every single morning."),
                     ("Ana", "ana", "She is a grey cat and she loves the warm laptop.")], "w2")
    store = stack.store
    async with await MemoryClient.connect(stack.nats_url, tenant) as client:
        await store_all(client, turns)
        await client.consolidate(jobs=["merge"])
        before = {e.id: e for e in await all_entries(store, Scope(tenant_id=tenant))}
        hers = {(t.conversation_id, t.turn_id) for t in turns if t.user_id == "ana"}
        texts = ana + [t.text for t in turns if t.conversation_id == "w2"]
        assert any(e.user_id == "bo" and trace_of(e, texts, hers) for e in before.values())
        assert any("(before: Ana:" in e.text for e in before.values())  # the quote of her turn
        assert any(e.merged_into for e in before.values()), "Bo's two windows with her words were merged"

        receipt = await client.forget(user_id="ana")

        after = {e.id: e for e in await all_entries(store, Scope(tenant_id=tenant))}
        left = {e.id: trace_of(e, texts, hers) for e in after.values() if trace_of(e, texts, hers)}
        assert not left, left
        assert receipt.verified and receipt.remaining.total == 0, receipt
        gone = set(before) - set(after)
        changed = {i for i in after if after[i].text != before[i].text}
        assert receipt.deleted.entries == len(gone) and receipt.deleted.rewritten == len(changed) >= 3, receipt
        assert set(after) <= set(before)
        bo_words = [text for _, _, text in bo_opens + bo_quotes if _ == "Bo" and len(text) > 10]
        kept = " ".join(" ".join(e.text.split()) for e in after.values())
        assert all(text in kept for text in bo_words), kept
        assert all(e.user_id != "ana" for e in after.values())
        for entry in (after[i] for i in changed if after[i].kind == "episodic"):  # written again, turn lines too
            own = entry.unmerged["source_turn_ids"] if entry.unmerged is not None else entry.source_turn_ids
            assert len(entry.turn_lines) == len(own), entry
            assert entry.turn_roles == ["user"] * len(own), entry  # and each kept turn's role, in step
            lines = entry.text.split("\n")
            assert all(lines[s.first].startswith(f"{s.speaker}: ") for s in entry.turn_lines), entry
