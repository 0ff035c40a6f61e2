"""A flood of turns: one tenant's flood fills its own stream and its own consumer's slots, and another tenant's
windows are still stored (how fast, against the calm case, is `make flood`'s to measure, not a test's)."""
from engram_client import wait_until_stored
from services.stack import Running
from shared.messaging import streams
from tests.support.attack import ATTACKER_QUOTA, Tenants
from tests.support.polling import eventually
from tests.support.secured import Deployment, raw
from tests.support.turns import conversation, make_turn

FLOOD_TURNS = 300  # in one conversation: more windows than may wait (32), so turns must wait in the stream


async def test_a_flood_of_turns_holds_only_its_own_slots_and_another_tenants_window_is_stored(
        deployment: Deployment, stack: Running, tenants: Tenants) -> None:
    """The attacker publishes 300 turns into one conversation at once; meanwhile the victim's conversation is stored,
    the attacker's consumer never holds more than its quota of unacknowledged turns, and in the end every flooded turn
    is stored (none lost to the flood's own back-pressure)."""
    hostile = await raw(deployment, deployment.security(tenants.attacker), "attacker")
    js = hostile.nc.jetstream()
    flood = [make_turn(f"Flood turn {i}: the weather report number {i}.", conversation_id="flood",
                       turn_id=f"flood-{i}") for i in range(FLOOD_TURNS)]
    peak = 0
    insider = await raw(deployment, deployment.engram_security(), "insider")

    async def held() -> int:
        nonlocal peak
        info = await insider.nc.jetstream().consumer_info(streams.turns_stream("mem", tenants.attacker), "ingestor")
        peak = max(peak, info.num_ack_pending)
        return int(info.num_pending or 0) + int(info.num_ack_pending or 0)

    try:
        for turn in flood:
            await js.publish(f"mem.{tenants.attacker}.turns", turn.model_dump_json().encode(), timeout=10,
                             headers={"Nats-Msg-Id": turn.msg_id(tenants.attacker)})
        await js.publish(f"mem.{tenants.attacker}.flush", b'{"conversation_id": "flood"}', timeout=10)
        calm = conversation([("Ana", "The plumber comes on Thursday at nine."), ("Bot", "Noted.")],
                            conversation_id="v-calm")
        async with await deployment.client(tenants.victim) as victim:
            await victim.publish_turns(calm)
            await victim.flush("v-calm")
            await wait_until_stored(victim, calm, timeout_s=120)
            await held()
        await eventually(held, lambda n: n == 0, timeout_s=300, interval_s=0.5)
        assert peak <= int(str(ATTACKER_QUOTA["max_unacked_turns"]))
        async with await deployment.client(tenants.attacker, timeout_s=60) as attacker:
            await wait_until_stored(attacker, flood, timeout_s=300)
    finally:
        await hostile.nc.close()
        await insider.nc.close()
