"""De-duplication: each tenant's turns stream has a de-duplication window of its own, so the documented id
`<tenant>:<conversation>:<turn>` cannot be borrowed to drop another tenant's turn, nor probed to learn whether another
tenant published it."""
from engram_client import wait_until_stored
from services.stack import Running
from tests.support.attack import Tenants, VictimMemory
from tests.support.secured import Deployment, raw
from tests.support.turns import make_turn


async def test_a_borrowed_deduplication_id_drops_nothing_and_tells_nothing(
        deployment: Deployment, stack: Running, tenants: Tenants, victim_memory: VictimMemory) -> None:
    """The attacker publishes its own turn under the victim's next id first: the victim's real turn is stored (its
    acknowledgement is no duplicate) and recalled. The attacker publishing the victim's existing ids learns nothing:
    its acknowledgements never say duplicate."""
    victim_turn = make_turn("My sister Lena lives in Porto.", conversation_id="v-dup", turn_id="v-dup-0")
    stolen_id = victim_turn.msg_id(tenants.victim)
    hostile = await raw(deployment, deployment.security(tenants.attacker), "attacker")
    try:
        js = hostile.nc.jetstream()
        decoy = make_turn("decoy", conversation_id="v-dup", turn_id="v-dup-0").model_dump_json().encode()
        first = await js.publish(f"mem.{tenants.attacker}.turns", decoy, headers={"Nats-Msg-Id": stolen_id})
        assert not first.duplicate and first.stream.endswith(tenants.attacker)
        async with await deployment.client(tenants.victim) as victim:
            seq = await victim.publish_turn(victim_turn)
            assert seq > 0
            await victim.flush("v-dup")
            await wait_until_stored(victim, [victim_turn], timeout_s=60)
            found = await victim.recall("Where does Lena live?")
            assert any("Porto" in e.text for e in found.entries)
        for turn in victim_memory.stored:  # the victim's ids, published long ago: are they known?
            probe = await js.publish(f"mem.{tenants.attacker}.turns", decoy,
                                     headers={"Nats-Msg-Id": turn.msg_id(tenants.victim)})
            assert not probe.duplicate
    finally:
        await hostile.nc.close()
