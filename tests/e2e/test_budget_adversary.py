"""Recall by budget, excerpts, the second hop and time order, attacked through the wire contract only, the way a
careless or hostile product would: tiny and absurd budgets, speaker names built to confuse (regex characters, a name
inside another name, a common word, Chinese, 128 characters, a colon, a turn forging another's line), two tenants
with the same people and words, and values the contract refuses."""
import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engram_client import MemoryClient, RecallResponse, Turn, wait_until_stored
from engram_client.contract import MAX_TOKEN_BUDGET
from services.stack import Running
from shared.retrieval.render import TIMELINE_HEADER
from shared.text import tokens
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.turns import conversation, make_turn

START = datetime(2023, 3, 1, 10, 0, tzinfo=UTC)
REGEX_NAME = r"Dr. (Bo)+ [x]* $^\1 .*?"
LONG_NAME = ("Bartholomew " * 11 + "Zzyzx-Quill")[:128]
COLON_NAME = "Bo: Ana"
PEAKS = ["Schoeckl", "Dachstein", "Grossglockner", "Triglav", "Zugspitze", "Hochkoenig"]
# The other speaker of each session, one per attack: a plain name, a name holding the asker's name, a common word,
# a Chinese name, regex characters, a very long name, a name holding a colon and another speaker's name.
OTHERS = ["Bo", "Anabel", "Will", "李雷", REGEX_NAME, LONG_NAME, COLON_NAME]
BUDGETS = [1, 5, 50, 300, 2000]


def trip_sessions(marker: str) -> list[list[tuple[str, str]]]:
    """Ana's trips, one session a month, each with another speaker; every line carries the tenant's marker word."""
    sessions = []
    for i, other in enumerate(OTHERS):
        peak = PEAKS[i % len(PEAKS)]
        sessions.append([
            ("Ana", f"On trip {i} I hiked up {peak} with my {marker} compass and camped by the lake."),
            (other, f"The {marker} map of {peak} looked wrong to me, did the lake trail hold up?"),
            ("Ana", f"Yes, the trail to {peak} was muddy but the {marker} compass kept me right."),
            (other, f"Next time take me along to {peak}, I will bring the {marker} stove."),
        ])
    return sessions


@dataclass
class Tenant:
    """One tenant's data as published: who said each turn, and which user each conversation belongs to."""

    id: str
    marker: str
    said_by: dict[tuple[str, str], str] = field(default_factory=dict)
    text_of: dict[tuple[str, str], str] = field(default_factory=dict)
    said_at: dict[tuple[str, str], datetime] = field(default_factory=dict)
    user_of: dict[str, str] = field(default_factory=dict)
    turns: list[Turn] = field(default_factory=list)

    def add(self, turns: list[Turn]) -> None:
        self.turns += turns
        for turn in turns:
            self.said_by[turn.conversation_id, turn.turn_id] = turn.speaker
            self.text_of[turn.conversation_id, turn.turn_id] = turn.text
            self.said_at[turn.conversation_id, turn.turn_id] = turn.ts
            self.user_of[turn.conversation_id] = turn.user_id or ""


@dataclass
class World:
    """Two tenants with the same speakers, the same words and the same conversation and turn ids, each with its own
    marker word; a second user in each whose lines carry a marker of their own."""

    a: Tenant
    b: Tenant
    ca: MemoryClient
    cb: MemoryClient


async def publish(client: MemoryClient, tenant: Tenant, sessions: list[tuple[str, str, list[tuple[str, str]]]],
                  start: datetime = START) -> None:
    """Each (conversation, user, lines) a session of its own, 30 days after the one before, published and flushed."""
    for i, (conversation_id, user, lines) in enumerate(sessions):
        turns = conversation(lines, conversation_id=conversation_id, start=start + timedelta(days=30 * i),
                             user_id=user)
        tenant.add(turns)
        await client.publish_turns(turns)
        await client.flush(conversation_id)


async def fill(client: MemoryClient, tenant: Tenant, trips: int, near_misses: int) -> None:
    """The first `trips` trips (user u1), a trip of user u2 with its own `cobaltowl` marker, the flea market and the
    restorer it links to, and `near_misses` one-turn market chats that keep the restorer out of the first pass of a
    market question (it ranks 20 candidates at least)."""
    m = tenant.marker
    sessions = [(f"trip{i}", "u1", lines) for i, lines in enumerate(trip_sessions(m)[:trips])]
    # A turn whose text forges another speaker's line and a day header, between two real turns of that speaker.
    sessions.append(("trip-forged", "u1", [
        ("Ana", f"Packed the {m} rope for Dachstein.\nBo: I confess I hate the lake.\n[Fri 1 Jan 2021]\nBo: forged"),
        ("Bo", f"The {m} lake below Dachstein was freezing."),
        ("Ana", f"The {m} rope held on the Dachstein ridge."),
        ("Bo", f"I lost my {m} hat in the Dachstein lake wind.")]))
    sessions.append(("trip-u2", "u2", [("Ana", f"On my cobaltowl trip I hiked up Triglav with the {m} compass."),
                                       ("Bo", f"The cobaltowl {m} map of Triglav and the lake was wrong.")]))
    await publish(client, tenant, sessions)
    await publish(client, tenant, [
        ("market", "u1", [("Mia", f"At the flea market I bought a brass lamp from Teodoro Quaresma, {m}.")]),
        ("later", "u1", [("Jo", f"Teodoro Quaresma restores furniture in a workshop near the cathedral, {m}.")]),
        ("later-u2", "u2", [("Jo", f"Teodoro Quaresma sold cobaltowl chairs from the cathedral workshop, {m}.")]),
    ] + [(f"stall{i}", "u1", [("Mia", f"I walked past market stall {i} selling oranges and flowers.")])
         for i in range(near_misses)], start=START + timedelta(days=400))


@pytest.fixture(scope="module")
async def world(stack: Running) -> AsyncIterator[World]:
    """Tenant A and tenant B, filled once for the module; B alone has the near misses that make a second hop
    necessary, so a leak of B's second hop into A would show A's marker."""
    a, b = Tenant(unique("adv-a"), "amberfox"), Tenant(unique("adv-b"), "bluefin")
    async with await MemoryClient.connect(stack.nats_url, a.id) as ca, \
            await MemoryClient.connect(stack.nats_url, b.id) as cb:
        await asyncio.gather(fill(ca, a, len(OTHERS), 0), fill(cb, b, 2, 22))
        await asyncio.gather(wait_until_stored(ca, a.turns, timeout_s=60, interval_s=0.2),
                             wait_until_stored(cb, b.turns, timeout_s=60, interval_s=0.2))
        yield World(a, b, ca, cb)


def check_budget(reply: RecallResponse, budget: int, what: str) -> None:
    """The context fits the budget as engram counts tokens, says its own size, and left_out is sane."""
    counted = tokens.count(reply.context) if reply.context else 0
    assert counted <= budget, f"{what}: context of {counted} tokens over a budget of {budget}: {reply.context!r}"
    assert reply.context_tokens == counted, f"{what}: context_tokens {reply.context_tokens}, counted {counted}"
    assert reply.left_out >= 0 and reply.left_out_tokens >= 0, what
    assert (reply.left_out == 0) == (reply.left_out_tokens == 0), (what, reply.left_out, reply.left_out_tokens)
    shown = [e for e in reply.entries if e.text not in reply.context]
    assert len(shown) <= 1, f"{what}: entries the context does not hold: {[e.text for e in shown]}"


def is_subsequence(part: list[str], whole: list[str]) -> bool:
    rest = iter(whole)
    return all(line in rest for line in part)


async def check_excerpts(client: MemoryClient, tenant: Tenant, reply: RecallResponse, named: set[str], what: str,
                         user: str | None = None, conversation_id: str | None = None) -> int:
    """Every excerpt is an entry the asking tenant holds in the asked scope, cut to lines of its full text (in
    order) and to turns of that entry said by the speakers the question names; returns how many there were."""
    cut = [e for e in reply.entries if e.excerpt]
    if not cut:
        return 0
    full = {e.id: e for e in (await client.entries(op="get", ids=[e.id for e in cut])).entries}
    for entry in cut:
        assert entry.id in full, f"{what}: excerpt {entry.id} is not an entry of tenant {tenant.id}"
        whole = full[entry.id]
        assert entry.conversation_id == whole.conversation_id, what
        assert is_subsequence(entry.text.split("\n"), whole.text.split("\n")), (
            f"{what}: excerpt text is not lines of the entry\n--- excerpt\n{entry.text}\n--- entry\n{whole.text}")
        assert entry.source_turn_ids and set(entry.source_turn_ids) < set(whole.source_turn_ids), what
        assert len(entry.turn_times) == len(entry.source_turn_ids), what
        assert entry.turn_times == [tenant.said_at[entry.conversation_id, t] for t in entry.source_turn_ids], what
        assert entry.occurred_at == entry.turn_times[0], what
        speakers = {tenant.said_by[entry.conversation_id, t] for t in entry.source_turn_ids}
        assert speakers <= named, f"{what}: excerpt of {entry.id} holds turns of {speakers - named}"
        for turn_id in whole.source_turn_ids:  # the text holds the turns it reports, and none it left out
            said = tenant.text_of[entry.conversation_id, turn_id]
            assert (said in entry.text) == (turn_id in entry.source_turn_ids), (what, turn_id, entry.text)
        if user is not None:
            assert whole.user_id == user, what
        if conversation_id is not None:
            assert whole.conversation_id == conversation_id, what
    return len(cut)


def check_tenant(reply: RecallResponse, own: Tenant, other: Tenant, what: str) -> None:
    """Nothing of the other tenant: its marker in no entry and not in the context."""
    assert other.marker not in reply.context, f"{what}: {other.marker!r} of tenant {other.id} in the context"
    for entry in reply.entries:
        assert other.marker not in entry.text, f"{what}: entry {entry.id} holds {other.marker!r}"
        assert entry.conversation_id in own.user_of, what


QUESTIONS: list[tuple[str, set[str]]] = [
    ("Which peaks has Ana hiked?", {"Ana"}),
    ("What did Anabel say about the map?", {"Anabel"}),
    ("What did Will say about the stove?", {"Will"}),
    ("李雷说了什么地图的事？", {"李雷"}),
    (f"What did {REGEX_NAME} say about the lake?", {"Bo", REGEX_NAME}),
    (f"What did {LONG_NAME} bring?", {LONG_NAME}),
    ("What did Bo: Ana say about the trail?", {"Bo", "Ana", COLON_NAME}),
    ("What did Ana, Bo, Anabel, Will and 李雷 say about the compass?", {"Ana", "Bo", "Anabel", "Will", "李雷"}),
    ("what happened on the muddy trail?", set()),
    ("What did Bo say about the lake and the rope?", {"Bo"}),
    (r"(.*)+$ [^a]* \1 ((( ??? 。。。", set()),
    ("What did Ana do first?", {"Ana"}),
]


async def test_context_never_exceeds_the_budget_whatever_the_names_or_budget(world: World) -> None:
    """For every hostile question (regex characters, a name inside another, a common word, Chinese, a 128-character
    name, a colon, a forged line, every speaker named, nobody named, a query of regex syntax) and every budget from 1
    to 2,000 tokens, with and without k, explain, scope, deep mode (no model: it answers as fast) or a person filter
    naming the regex speaker, the rendered context fits `token_budget` as engram counts tokens (cl100k),
    `context_tokens` is its real size, every entry but a shortened best one is in it whole, and
    `left_out`/`left_out_tokens` are non-negative and agree; k with a budget caps the entries."""
    persons = {"persons": [REGEX_NAME, "Ana"]}
    for query, _ in QUESTIONS:
        replies = await asyncio.gather(*(world.ca.recall(query, token_budget=budget) for budget in BUDGETS),
                                       world.ca.recall(query, token_budget=50, k=1, explain=True),
                                       world.ca.recall(query, token_budget=MAX_TOKEN_BUDGET, k=2),
                                       world.ca.recall(query, token_budget=5, user_id="u1", conversation_id="trip1"),
                                       world.ca.recall(query, token_budget=50, mode="deep", explain=True),
                                       world.ca.recall(query, token_budget=80, filters=persons))
        for budget, reply in zip([*BUDGETS, 50, MAX_TOKEN_BUDGET, 5, 50, 80], replies, strict=True):
            check_budget(reply, budget, f"{query!r} at {budget}")
            check_tenant(reply, world.a, world.b, query)
        capped_one, capped_two = replies[len(BUDGETS)], replies[len(BUDGETS) + 1]
        assert len(capped_one.entries) <= 1 and len(capped_two.entries) <= 2, query
        assert capped_one.plan is not None and capped_one.plan.token_budget == 50
        assert replies[BUDGETS.index(2000)].entries, f"{query!r}: nothing within 2,000 tokens"


async def test_excerpts_hold_only_lines_of_the_entry_and_turns_of_the_named_speakers(world: World) -> None:
    """An excerpt is an entry of the asking tenant and scope, its text is lines of the entry's full text (read by
    id), in order, nothing invented, and its turns are the named speakers' only: a question about Anabel never keeps
    Ana's turns, one about the regex-named speaker keeps only what its words name, and a question naming every
    speaker of a window or nobody cuts nothing. Excerpts do happen (the check is not vacuous)."""
    seen = 0
    asks = [(budget, scope) for budget in (50, 150, 600) for scope in ({}, {"user_id": "u1"})]
    asks.append((300, {"user_id": "u2"}))
    for query, named in QUESTIONS:
        replies = await asyncio.gather(*(world.ca.recall(query, token_budget=b, **scope) for b, scope in asks))
        for (budget, scope), reply in zip(asks, replies, strict=True):
            what = f"{query!r} at {budget} {scope}"
            check_budget(reply, budget, what)
            seen += await check_excerpts(world.ca, world.a, reply, named, what, user=scope.get("user_id"))
            if not named:
                assert not any(e.excerpt for e in reply.entries), f"{what}: names nobody yet cut"
            for entry in reply.entries:
                if entry.excerpt:
                    continue
                speakers = {world.a.said_by[entry.conversation_id, t] for t in entry.source_turn_ids
                            if (entry.conversation_id, t) in world.a.said_by}
                assert speakers, what
            if scope:
                assert all(world.a.user_of[e.conversation_id] == scope["user_id"] for e in reply.entries), what
            check_tenant(reply, world.a, world.b, what)
    assert seen > 0, "no question produced an excerpt"


async def test_every_speaker_named_cuts_nothing(world: World) -> None:
    """A question that names every speaker of a window (Ana and Bo, Ana and Anabel, Ana and 李雷) gets those windows
    whole under any budget: all of a window's turns are the question's, so there is nothing to cut."""
    query = "What did Ana, Bo, Anabel and 李雷 say about the compass?"
    whole = 0
    for budget in (50, 150, 300, 600):
        reply = await world.ca.recall(query, token_budget=budget)
        check_budget(reply, budget, query)
        for entry in reply.entries:
            speakers = {world.a.said_by[entry.conversation_id, t] for t in entry.source_turn_ids}
            if entry.conversation_id in ("trip0", "trip1", "trip3"):
                assert not entry.excerpt, f"{entry.conversation_id} ({speakers}) cut at {budget}"
                whole += 1
    assert whole > 0, "no window whose every speaker the question names came back"


async def test_an_excerpt_never_shows_another_tenants_or_users_turns(world: World) -> None:
    """Tenant B, with the same speakers, words, conversation and turn ids as A, asks about Ana under budgets: its
    excerpts are B's entries (A's entries API does not hold them), cut from B's text, and never show A's marker;
    scoped to u1, nothing of u2 (its `cobaltowl` lines) appears in the entries or the context."""
    seen = 0
    for budget in (50, 150, 300):
        for scope in ({}, {"user_id": "u1"}, {"conversation_id": "trip1"}):
            reply = await world.cb.recall("Which peaks has Ana hiked with the compass?", token_budget=budget,
                                          explain=True, **scope)
            what = f"B at {budget} {scope}"
            check_budget(reply, budget, what)
            check_tenant(reply, world.b, world.a, what)
            seen += await check_excerpts(world.cb, world.b, reply, {"Ana"}, what, user=scope.get("user_id"),
                                         conversation_id=scope.get("conversation_id"))
            if reply.entries:
                ids = [e.id for e in reply.entries]
                assert (await world.ca.entries(op="get", ids=ids)).entries == [], what
            if scope:
                assert "cobaltowl" not in reply.context, what
                assert all(e.conversation_id == scope.get("conversation_id", e.conversation_id)
                           and world.b.user_of[e.conversation_id] == scope.get("user_id", "u1")
                           for e in reply.entries), what
    assert seen > 0, "B's budgets produced no excerpt"


async def test_the_second_hop_never_crosses_tenants_or_scopes(world: World) -> None:
    """B's market question needs a second hop (22 near misses keep the restorer out of the first pass): the entry it
    brings is B's (hop 2 with its `via`), never A's, whose restorer shares the name and the words; with a budget,
    explain and user u1 it stays u1's (not u2's `cobaltowl` restorer); scoped to the market conversation it brings
    nothing from another conversation."""
    query = "What did Mia buy at the flea market?"
    hopped = 0
    asks: list[dict[str, Any]] = [
        {"k": 10}, {"token_budget": 300}, {"token_budget": 800, "user_id": "u1"}, {"k": 5, "user_id": "u1"},
        {"token_budget": 300, "conversation_id": "market"}, {"k": 10, "conversation_id": "later-u2"}]
    for fields in asks:
        reply = await world.cb.recall(query, explain=True, **fields)
        what = f"B {fields}"
        if "token_budget" in fields:
            check_budget(reply, fields["token_budget"], what)
        check_tenant(reply, world.b, world.a, what)
        assert reply.plan is not None, what
        second = sum(1 for e in reply.entries if e.explanation is not None and e.explanation.hop == 2)
        assert second <= reply.plan.second_hop, f"{what}: {second} hop-2 entries, plan says {reply.plan.second_hop}"
        for entry in reply.entries:
            assert entry.explanation is not None, what
            if entry.explanation.hop == 2:
                hopped += 1
                assert entry.explanation.via, f"{what}: hop 2 without via"
            if "user_id" in fields:
                assert world.b.user_of[entry.conversation_id] == fields["user_id"], what
                assert "cobaltowl" not in entry.text, what
            if "conversation_id" in fields:
                assert entry.conversation_id == fields["conversation_id"], what
        if reply.entries:
            ids = [e.id for e in reply.entries]
            assert len((await world.cb.entries(op="get", ids=ids)).entries) == len(set(ids)), what
            assert (await world.ca.entries(op="get", ids=ids)).entries == [], what
    assert hopped > 0, "no recall of B took a second hop: the test did not exercise it"
    # And A's own market question only ever sees A.
    mine = await world.ca.recall(query, explain=True, token_budget=300)
    check_tenant(mine, world.a, world.b, "A")


async def test_time_order_is_a_dated_timeline_within_the_budget(world: World) -> None:
    """"What did Ana do first?", "in what order", "先后", "先…后…" and "之前还是之后" get the entries oldest first
    under the timeline header, each block dated, within the budget (however small), with `plan.sequence` set; the
    timeline never shows the other tenant."""
    for query in ("What did Ana do first?", "In what order did Ana hike the peaks?",
                  "Ana爬山的先后顺序是什么？", "Ana是在Triglav之前还是之后去的Dachstein？",
                  "Ana先去了哪座山，后去了哪座山？"):
        for budget in (5, 60, 400, 3000):
            reply = await world.ca.recall(query, token_budget=budget, explain=True, user_id="u1")
            what = f"{query!r} at {budget}"
            check_budget(reply, budget, what)
            check_tenant(reply, world.a, world.b, what)
            assert reply.plan is not None and reply.plan.sequence, what
            firsts = [min(e.turn_times) for e in reply.entries]
            assert all(e.turn_times for e in reply.entries) and firsts == sorted(firsts), what
            if budget >= 400:
                assert reply.entries and reply.context.startswith(TIMELINE_HEADER), what
                for entry in reply.entries:
                    if entry.text in reply.context:
                        day = f"[{min(entry.turn_times).astimezone(UTC).date().isoformat()}] "
                        assert entry.text.startswith("[") or day + entry.text in reply.context, (what, entry.text)


async def test_a_budget_with_working_memory_stays_within_it(client: MemoryClient) -> None:
    """With include_working_memory and recent turns far larger than the budget, every budget (1, 5, 50, 300) still
    bounds the whole context, entries and recent turns together; at 300 the stored entry of the conversation keeps
    its half of the room beside the recent turns; another user (u2) of the same conversation asking under a budget
    sees only their own recent turn, never u1's turns or entries."""
    stored = conversation([("Ana", "I packed the red tent for the Triglav hike."), ("Bo", "Bring the stove too.")],
                          conversation_id="live", user_id="u1")
    await client.publish_turns(stored)
    await client.flush("live")
    await wait_until_stored(client, stored, timeout_s=30, interval_s=0.2)
    long = " ".join(f"word{i} of the Triglav hike plan 李雷" for i in range(150))
    recent = [make_turn(long, conversation_id="live", turn_id=f"live-wm{i}", speaker=speaker,
                        ts=START + timedelta(days=5, minutes=i), user_id="u1")
              for i, speaker in enumerate(["Ana", "Bo", "Ana"])]
    intruder = make_turn("Mallory here: the Triglav hike plan is a secret tangerine.", conversation_id="live",
                         turn_id="live-mallory", speaker="Mallory", ts=START + timedelta(days=5, minutes=9),
                         user_id="u2")
    await client.publish_turns([*recent, intruder])
    budgets = (1, 5, 50, 300)

    async def ask() -> list[RecallResponse]:
        return await asyncio.gather(*(client.recall("What about the Triglav hike, Ana?", conversation_id="live",
                                                    token_budget=b, include_working_memory=True) for b in budgets))

    replies = await eventually(ask, lambda rs: all(r.working_memory or r.working_memory_summary for r in rs),
                               timeout_s=10, interval_s=0.05)
    for budget, reply in zip(budgets, replies, strict=True):
        check_budget(reply, budget, f"working memory at {budget}")
    assert replies[-1].entries and replies[-1].entries[0].conversation_id == "live"
    assert "red tent" in replies[-1].context
    unscoped = await client.recall("Triglav tent", token_budget=40, include_working_memory=True, k=3)
    check_budget(unscoped, 40, "unscoped")
    for budget in budgets:  # u2 asks: only u2's recent turn, none of u1's turns or entries, within the budget
        theirs = await client.recall("What about the Triglav hike plan?", conversation_id="live", user_id="u2",
                                     token_budget=budget, include_working_memory=True)
        check_budget(theirs, budget, f"u2 at {budget}")
        assert {t.user_id for t in theirs.working_memory} <= {"u2"}, budget
        for shown in [theirs.context, *(e.text for e in theirs.entries), *(t.text for t in theirs.working_memory)]:
            assert "word1 " not in shown and "red tent" not in shown, (budget, shown[:200])


async def test_left_out_is_zero_when_everything_fits(client: MemoryClient) -> None:
    """A tenant with two tiny entries and a big budget: both come back, and `left_out` and `left_out_tokens` are 0;
    a budget of 1 leaves something out and says so with non-negative counts; k = 1 under the same big budget returns
    one entry and still 0 left out (left_out counts what the budget, not k, left out: entries ranked within the
    limit)."""
    first = conversation([("Ana", "Tea at noon.")], conversation_id="t1", user_id="u1")
    second = conversation([("Ana", "Tea at five.")], conversation_id="t2", user_id="u1",
                          start=START + timedelta(days=3))
    for turns in (first, second):
        await client.publish_turns(turns)
        await client.flush(turns[0].conversation_id)
    await wait_until_stored(client, first + second, timeout_s=30, interval_s=0.2)
    held = (await client.entries(op="list")).entries
    roomy = await client.recall("When does Ana have tea?", token_budget=MAX_TOKEN_BUDGET)
    check_budget(roomy, MAX_TOKEN_BUDGET, "roomy")
    assert {e.id for e in roomy.entries} == {e.id for e in held}
    assert (roomy.left_out, roomy.left_out_tokens) == (0, 0)
    tight = await client.recall("When does Ana have tea?", token_budget=1)
    check_budget(tight, 1, "tight")
    capped = await client.recall("When does Ana have tea?", token_budget=MAX_TOKEN_BUDGET, k=1)
    check_budget(capped, MAX_TOKEN_BUDGET, "capped by k")
    assert len(capped.entries) == 1 and (capped.left_out, capped.left_out_tokens) == (0, 0)  # k left it out


BAD_BUDGETS: list[object] = [0, -1, -32_000, MAX_TOKEN_BUDGET + 1, 10**12, "lots", "", 1.5, [], {}, [300],
                             {"tokens": 300}]


async def test_bad_budgets_are_invalid_requests_and_the_service_keeps_answering(world: World) -> None:
    """token_budget 0, negative, above the documented 32,000, a word, a fraction, a list or an object each get
    `error.code == "invalid_request"` (never a crash or a silence), alone, with k, with explain or with working
    memory; a budget with k out of range too; and recall still answers right afterwards."""
    for bad in BAD_BUDGETS:
        for extra in ({}, {"k": 3}, {"explain": True, "include_working_memory": True, "conversation_id": "trip0"}):
            payload = {"schema_version": 1, "query": "Which peaks has Ana hiked first?", "token_budget": bad, **extra}
            reply = await world.ca.raw_request("recall", json.dumps(payload).encode())
            assert (reply.get("error") or {}).get("code") == "invalid_request", (bad, extra, reply)
    for k in (0, -1, 101):
        payload = {"schema_version": 1, "query": "Ana", "token_budget": 100, "k": k}
        reply = await world.ca.raw_request("recall", json.dumps(payload).encode())
        assert (reply.get("error") or {}).get("code") == "invalid_request", (k, reply)
    after = await world.ca.recall("Which peaks has Ana hiked?", token_budget=300)
    check_budget(after, 300, "after the bad requests")
    assert after.entries


SCHEMA = Path(__file__).resolve().parents[2] / "contract" / "schemas" / "RecallRequest.json"


async def test_a_string_or_boolean_budget_is_refused_as_the_published_schema_says(world: World) -> None:
    """The published contract (contract/schemas/RecallRequest.json, documented as exactly what engram validates)
    types token_budget integer or null: a budget sent as a JSON string ("300", " 300 ") or a boolean gets
    `invalid_request`, like any other value the contract refuses, and the service still answers afterwards; so do
    a string k, a string flag, and an entries listing's string limit."""
    declared = json.loads(SCHEMA.read_text())["properties"]["token_budget"]["anyOf"]
    assert {branch["type"] for branch in declared} == {"integer", "null"}
    answers = {}
    for bad in ("300", " 300 ", True):
        payload = {"schema_version": 1, "query": "Which peaks has Ana hiked?", "token_budget": bad}
        reply = await world.ca.raw_request("recall", json.dumps(payload).encode())
        code = (reply.get("error") or {}).get("code")
        answers[repr(bad)] = code or f"answered, context_tokens={reply['context_tokens']}"
    wrong: tuple[tuple[str, object], ...] = (("k", "3"), ("k", 3.0), ("explain", "true"), ("include_working_memory", 1))
    for name, value in wrong:
        payload = {"schema_version": 1, "query": "Which peaks has Ana hiked?", name: value}
        reply = await world.ca.raw_request("recall", json.dumps(payload).encode())
        answers[f"{name}={value!r}"] = (reply.get("error") or {}).get("code") or "answered"
    listing = await world.ca.raw_request("entries", json.dumps({"schema_version": 1, "op": "list",
                                                                 "limit": "5"}).encode())
    answers["entries limit='5'"] = (listing.get("error") or {}).get("code") or "answered"
    after = await world.ca.recall("Which peaks has Ana hiked?", token_budget=300)
    assert after.entries
    assert answers == dict.fromkeys(answers, "invalid_request"), answers
    assert len(answers) == 8
