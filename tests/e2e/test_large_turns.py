"""The largest turns the contract accepts, many of them in one conversation: every one is stored, none is
dead-lettered, and recall and listings still answer within one NATS message."""
from datetime import UTC, datetime, timedelta

from engram_client import MemoryClient, wait_until_stored
from engram_client.contract import MAX_TEXT_CHARS, Turn
from services.stack import Running
from tests.support.dead_letters import dead_letter_count

PHRASES = ["我昨天在杭州的西湖边散步，", "看到很多人在划船，", "后来去了一家茶馆喝龙井茶，", "老板说这是今年的新茶。",
           "下周五我还要去上海开会，", "会议讨论机器学习在医疗中的应用。"]


def longest_turn(i: int) -> Turn:
    """A turn of exactly MAX_TEXT_CHARS Chinese characters (three bytes each in UTF-8)."""
    text = "".join(PHRASES[(i + j) % len(PHRASES)] for j in range(MAX_TEXT_CHARS))[:MAX_TEXT_CHARS]
    return Turn(conversation_id="long", turn_id=f"long-{i}", speaker="李雷" if i % 2 else "韩梅梅", role="user",
                text=text, ts=datetime(2024, 5, 1, 9, tzinfo=UTC) + timedelta(minutes=i), user_id="u-long")


async def test_thirty_maximal_chinese_turns_in_one_conversation_are_all_stored(stack: Running,
                                                                               client: MemoryClient) -> None:
    """Thirty turns of the maximal length in Chinese are all stored without a dead letter, once consolidation has
    settled recall ranks an episode first in a reply under 1 MiB, and paging lists all eight episodes once."""
    turns = [longest_turn(i) for i in range(30)]
    assert all(len(t.text) == MAX_TEXT_CHARS for t in turns)
    await client.publish_turns(turns)
    await client.flush("long")
    await wait_until_stored(client, turns, timeout_s=180)
    assert await dead_letter_count(stack.nats_url, client.tenant) == 0
    # Every window repeats the same six phrases, so the consolidator merges them as near-duplicates while they are
    # stored; a run of its own, under its lease, settles which episode keeps each group before recall is asked.
    await client.consolidate()
    reply = await client.recall("李雷在西湖边做了什么？", conversation_id="long", include_working_memory=True)
    assert reply.entries and "西湖" in reply.entries[0].text
    assert len(reply.model_dump_json().encode()) < 1024 * 1024
    seen, cursor = [], None
    while True:  # a listing of such entries pages itself to fit, losing none
        page = await client.entries(op="list", conversation_id="long", kind="episodic", limit=500, cursor=cursor)
        seen += [e.id for e in page.entries]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 8  # 30 turns in windows of 4: seven full and a flushed one
