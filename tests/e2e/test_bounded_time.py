"""No message stops engram: one tenant's turns built to be slow for the text rules, published while another tenant
chats, delay the other tenant's window by nothing it can notice (its window is stored and its recalls answered while
they are worked on), and every hostile turn ends stored (as plain lines past the time budget), none stuck.

How long the calm tenant waits against the calm case is a benchmark's to measure (`make flood`), not this test's."""
from bench.hostile_text import hostile_texts
from engram_client import MemoryClient, wait_until_stored
from services.stack import Running
from tests.support.ids import unique
from tests.support.turns import conversation, make_turn


async def test_hostile_turns_of_one_tenant_end_stored_while_another_tenant_chats(stack: Running) -> None:
    """36 hostile turns (runs of what patterns repeat, at 45 characters and some at the longest turn, and random mixes
    of both scripts) in one tenant; meanwhile a calm tenant's conversation is stored and recalled; then every hostile
    turn is stored."""
    hostile_tenant, calm_tenant = unique("hostile"), unique("calm")
    texts = hostile_texts()
    hostile = [make_turn(text, conversation_id=f"h{i // 4}", turn_id=f"h{i}") for i, text in enumerate(texts)]
    calm = conversation([("Ana", "I adopted a grey cat called Miso."), ("Bo", "Miso is a lovely name.")],
                        conversation_id="calm")
    async with await MemoryClient.connect(stack.nats_url, hostile_tenant, timeout_s=30) as attacker, \
            await MemoryClient.connect(stack.nats_url, calm_tenant) as friend:
        await attacker.publish_turns(hostile)
        for conversation_id in dict.fromkeys(t.conversation_id for t in hostile):
            await attacker.flush(conversation_id)
        await friend.publish_turns(calm)
        await friend.flush("calm")
        await wait_until_stored(friend, calm, timeout_s=60)
        found = await friend.recall("What is the cat called?")
        assert any("Miso" in e.text for e in found.entries)
        await wait_until_stored(attacker, hostile, timeout_s=600)
    assert await stack.health.problem() is None
