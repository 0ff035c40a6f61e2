"""One tenant flooding a retriever with recalls waits in its queue and is refused past it; another tenant's recalls
all answer; a busy tenant's requests wait their turn, and when its queue is full its SDK clients honour the
refusal's retry hint and all get their answers."""
import asyncio
from collections import Counter

import pytest
from prometheus_client import REGISTRY

from engram_client import MemoryClient, wait_until_stored
from services.stack import running
from shared.settings import Settings
from tests.support.ids import unique
from tests.support.turns import conversation

FLOOD_IN_FLIGHT = 64
CALM_RECALLS = 30


async def test_a_flooding_tenant_is_refused_and_the_calm_tenant_is_answered(e2e_settings: Settings,
                                                                           nats_url: str) -> None:
    """A flooder that ignores retry hints fills its share and its queue and is refused past them, while every one of
    a calm tenant's recalls is answered correctly."""
    # The queues alone: no request rate in the way (tests/security/test_quotas.py holds the rates).
    settings = e2e_settings.model_copy(update={"recall_workers": 4, "recall_tenant_share": 0.5,  # 2 per tenant
                                               "recall_tenant_queue": 8, "tenant_recall_per_s": 1e6,
                                               "tenant_recall_burst": 1_000_000})
    calm_tenant, loud_tenant = unique("calm"), unique("loud")
    turns = conversation([("Ana", "I moved to Lisbon in May 2023."), ("Bo", "Lisbon suits you, Ana.")],
                         conversation_id="calm-1")
    refused_before = REGISTRY.get_sample_value("engram_tenant_limited_total", {"kind": "recall"}) or 0.0
    outcomes: Counter[str] = Counter()
    calm_answers = []
    async with running(settings, nats_url=nats_url) as state, \
            await MemoryClient.connect(state.nats_url, calm_tenant) as calm, \
            await MemoryClient.connect(state.nats_url, loud_tenant) as loud:
        await calm.publish_turns(turns)
        await calm.flush("calm-1")
        await wait_until_stored(calm, turns, timeout_s=20)
        flooding = asyncio.Event()
        done = asyncio.Event()

        async def flood() -> None:  # a client that ignores the retry hint and asks again at once
            while not done.is_set():
                reply = await loud.raw_request("recall", b'{"query": "Where does Bo live?"}')
                if reply.get("error"):
                    outcomes[reply["error"]["code"]] += 1
                    flooding.set()
                else:
                    outcomes["ok"] += 1

        flooders = [asyncio.create_task(flood()) for _ in range(FLOOD_IN_FLIGHT)]
        try:
            await asyncio.wait_for(flooding.wait(), timeout=20)  # the flood is refused: it is past its share
            for _ in range(CALM_RECALLS):  # every one of them finds the flooder's requests in the way
                calm_answers.append(await calm.recall("Where does Ana live?", k=3))
        finally:
            done.set()
            await asyncio.gather(*flooders)
    refused_after = REGISTRY.get_sample_value("engram_tenant_limited_total", {"kind": "recall"}) or 0.0
    assert len(calm_answers) == CALM_RECALLS
    assert all("Lisbon" in a.entries[0].text for a in calm_answers)
    assert set(outcomes) == {"ok", "unavailable"}, outcomes  # refused, never timed out; and served its share
    assert refused_after - refused_before == outcomes["unavailable"]


@pytest.mark.parametrize("queue", [64, 4])
async def test_a_busy_tenants_requests_wait_their_turn_instead_of_failing(e2e_settings: Settings, nats_url: str,
                                                                        queue: int) -> None:
    """32 recalls at once with 2 in progress allowed: all answered; with room in the queue none is refused, and with
    a queue of 4 the refused ones are asked again by the SDK after the retry hint."""
    settings = e2e_settings.model_copy(update={"recall_workers": 4, "recall_tenant_share": 0.5,  # 2 per tenant
                                               "recall_tenant_queue": queue})
    tenant = unique("busy")
    turns = conversation([("Ana", "I moved to Lisbon in May 2023."), ("Bo", "Lisbon suits you, Ana.")],
                         conversation_id="busy-1")
    refused_before = REGISTRY.get_sample_value("engram_tenant_limited_total", {"kind": "recall"}) or 0.0
    async with running(settings, nats_url=nats_url) as state, \
            await MemoryClient.connect(state.nats_url, tenant, timeout_s=30) as client:
        await client.publish_turns(turns)
        await client.flush("busy-1")
        await wait_until_stored(client, turns, timeout_s=20)
        answers = await asyncio.gather(*(client.recall("Where does Ana live?", k=3) for _ in range(32)))
    refused = (REGISTRY.get_sample_value("engram_tenant_limited_total", {"kind": "recall"}) or 0.0) - refused_before
    print(f"\n32 recalls at once, 2 in progress allowed, queue {queue}: all answered, {refused:.0f} refusals "
          "retried by the SDK")
    assert all("Lisbon" in a.entries[0].text for a in answers)
    if queue >= 30:
        assert refused == 0  # they waited in the tenant's queue
    else:
        assert refused > 0  # the queue filled: the SDK waited and asked again
