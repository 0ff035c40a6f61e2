"""Current by default through NATS with the real store: a change said in words no rule reads still puts the newer
evidence first for a question about now, the older one stays findable for a question about before, and a derived
claim never stands above the newer evidence; explain and history say why."""
from datetime import UTC, datetime

from engram_client import MemoryClient
from engram_client.contract import RecallResponse
from tests.support.memory import store_all
from tests.support.turns import conversation

MARCH = datetime(2024, 3, 2, 18, 0, tzinfo=UTC)
SEPTEMBER = datetime(2024, 9, 14, 11, 0, tzinfo=UTC)
VIENNA = [("Lena", "I live in Vienna, in a tiny flat in Neubau, and honestly I love it."),
          ("Assistant", "Neubau is lovely, so many cafes."),
          ("Lena", "Yes! Also my dog Bruno has claimed the only sunny spot by the window."),
          ("Assistant", "Smart dog.")]
GRAZ = [("Lena", "We finally unpacked the last boxes at the new place in Graz, the balcony gets sun all day."),
        ("Assistant", "That sounds wonderful, congratulations on the move!"),
        ("Lena", "Bruno approves of the balcony too."),
        ("Assistant", "Of course he does.")]
LATENCY_BEFORE = [("小周", "结账服务的p95延迟现在是850毫秒，老板天天催。"), ("助手", "可以先看看数据库慢查询。"),
                  ("小周", "好，我们用的是PostgreSQL。"), ("助手", "那先开慢查询日志。")]
LATENCY_AFTER = [("小周", "这周加了缓存，结账服务p95降到320毫秒了！"), ("助手", "效果很明显，恭喜！"),
                 ("小周", "终于可以早点下班了哈哈"), ("助手", "好好休息～")]

# One sitting: a count, twenty minutes about other things, then the count again (a minute between turns).
BACKLOG = [("Mara", "The migration backlog has 30 open tickets right now, most of them about the billing screens."),
           ("Assistant", "Thirty is manageable in two sprints if you group them by screen and start with the ones "
                         "that block invoicing; the reports can wait until the end."),
           ("Mara", "Makes sense. The invoices are what the finance team keeps asking about."),
           ("Assistant", "Then put those first and tell finance the order, so they know when to expect them."),
           ("Mara", "Different topic: the sprint review moved to Thursday afternoon, the designers asked for it."),
           ("Assistant", "Thursday works. Send the agenda the day before so the designers can bring their "
                         "mock-ups, and keep the demo to the screens that changed."),
           ("Mara", "I will. I also need to book the big meeting room for it."),
           ("Assistant", "Book it for ninety minutes; reviews with designers tend to run over."),
           ("Mara", "Quick update: we closed a few today, 24 tickets to go in the backlog."),
           ("Assistant", "Nice progress. At this pace the billing screens are clear by the end of next week."),
           ("Mara", "Fingers crossed, the last ones are the hardest."),
           ("Assistant", "They usually are; keep an hour a day for them.")]


def first_holding(reply: RecallResponse, word: str) -> int | None:
    """The rank (0-based) of the first entry whose text holds `word`."""
    return next((i for i, e in enumerate(reply.entries) if word in e.text), None)


async def test_a_move_no_rule_reads_is_current_and_the_old_home_is_still_found(client: MemoryClient) -> None:
    """"Unpacked the last boxes at the new place in Graz" parses as no fact, yet "where does Lena live now?" gets
    Graz first (explained), the Vienna fact stands below it, and "before" still finds Vienna."""
    await store_all(client, conversation(VIENNA, "lena-march", MARCH, user_id="lena")
                + conversation(GRAZ, "lena-september", SEPTEMBER, user_id="lena"))
    await client.consolidate()

    now = await client.recall("Where does Lena live now?", user_id="lena", explain=True)
    assert "Graz" in now.entries[0].text, [(e.kind, e.text) for e in now.entries]
    top = now.entries[0].explanation
    assert top is not None and any("question about the present (now)" in why for why in top.ordering), top
    vienna_fact = next((i for i, e in enumerate(now.entries) if e.kind == "fact" and "Vienna" in e.text), None)
    assert vienna_fact is None or vienna_fact > 0
    profile = next((e for e in now.entries if e.kind == "profile"), None)
    assert profile is None or now.entries.index(profile) > 0  # a derived claim below the evidence

    before = await client.recall("Where did Lena live before?", user_id="lena", explain=True)
    assert first_holding(before, "Vienna") is not None, [e.text for e in before.entries]
    dog = await client.recall("What is the name of Lena's dog?", user_id="lena")
    assert first_holding(dog, "Bruno") == 0


async def test_a_project_figure_that_changed_is_current_in_chinese(client: MemoryClient) -> None:
    """Numbers of a project change too: the newer latency answers "现在", the older one "之前"."""
    await store_all(client, conversation(LATENCY_BEFORE, "zhou-1", MARCH, user_id="zhou")
                + conversation(LATENCY_AFTER, "zhou-2", SEPTEMBER, user_id="zhou"))
    await client.consolidate()

    now = await client.recall("结账服务的p95延迟现在是多少？", user_id="zhou", explain=True)
    assert "320毫秒" in now.entries[0].text, [e.text for e in now.entries]
    before = await client.recall("加缓存之前p95延迟是多少？", user_id="zhou")
    assert first_holding(before, "850毫秒") is not None


async def test_a_fact_possibly_outdated_says_so_and_history_shows_what_replaced_it(client: MemoryClient) -> None:
    """When newer evidence about the same thing exists, the older fact is kept but marked `outdated_by`, left out
    of the profile, and its history ends with that evidence."""
    await store_all(client, conversation(VIENNA, "lena-march", MARCH, user_id="lena2")
                + conversation([("Lena", "I don't live in Vienna any more, I live in Graz now, near the river."),
                                ("Assistant", "Graz is a great city."), ("Lena", "It really is."),
                                ("Assistant", "Enjoy!")], "lena-september", SEPTEMBER, user_id="lena2"))
    await client.consolidate()
    views = (await client.entries(op="list", user_id="lena2", limit=500)).entries
    old = [v for v in views if v.kind == "fact" and v.value == "Vienna"]
    assert old, [(v.kind, v.text) for v in views]
    replaced = [v for v in old if v.superseded_by or v.outdated_by]
    assert replaced, [(v.text, v.superseded_by, v.outdated_by) for v in old]
    history = (await client.entries(op="history", ids=[replaced[0].id])).entries
    assert history[0].id == replaced[0].id and len(history) >= 2
    assert "Graz" in history[-1].text
    profiles = [v for v in views if v.kind == "profile"]
    assert all("lives in Vienna" not in p.text for p in profiles), [p.text for p in profiles]


async def test_a_count_reported_again_in_the_same_sitting_is_current(client: MemoryClient) -> None:
    """Twenty minutes after "30 open tickets", between long answers, Mara says "24 tickets to go" in the same
    conversation: asked how many open tickets the backlog has (in the first window's words), the later window comes
    first and explain says what it restates; asked how many there were at first, the first count comes before it."""
    await store_all(client, conversation(BACKLOG, "mara-sitting", MARCH, user_id="mara"))
    await client.consolidate()

    now = await client.recall("How many open tickets does the migration backlog have?", user_id="mara",
                              explain=True)
    assert "24 tickets" in now.entries[0].text, [e.text for e in now.entries]
    top = now.entries[0].explanation
    assert top is not None and any("restates entry" in why for why in top.ordering), top
    before = await client.recall("How many tickets were in the migration backlog at first?", user_id="mara")
    first, later = first_holding(before, "30 open tickets"), first_holding(before, "24 tickets")
    assert first is not None and (later is None or first < later), [e.text for e in before.entries]
