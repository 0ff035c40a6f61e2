"""The attack suite's fixtures: deploy/nats/nats.conf on a real nats-server with TLS and generated tenants (each a NATS
account of its own, as `engram tenants` makes them), engram serving it as in production, and a victim tenant whose
memory holds stored entries and an open window. Each module gets its own deployment."""
from collections.abc import AsyncIterator, Iterator

import pytest

from engram_client import wait_until_stored
from services.stack import Running, running
from tests.support.attack import ATTACKER_QUOTA, Tenants, VictimMemory
from tests.support.ids import unique
from tests.support.secured import Deployment, deploy
from tests.support.turns import conversation


@pytest.fixture(scope="module")
def tenants() -> Tenants:
    """Fresh tenant ids for the module."""
    return Tenants(victim=unique("victim"), attacker=unique("attacker"), bystander=unique("bystander"))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, tenants: Tenants) -> Iterator[Deployment]:
    """deploy/nats/nats.conf running with the module's tenants; the attacker's quota is small."""
    running_deployment = deploy(tmp_path_factory.mktemp("deployment"), [tenants.victim, tenants.bystander])
    running_deployment.add(tenants.attacker, **ATTACKER_QUOTA)
    running_deployment.reload()
    yield running_deployment
    running_deployment.stop()


@pytest.fixture(scope="module")
async def stack(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory,
                request: pytest.FixtureRequest) -> AsyncIterator[Running]:
    """engram serving the deployment with its own NATS user and the tenants registry. Windows stay open for 10 min
    unless flushed (so the victim's open window is still open when the attacks are over), or for the module's
    IDLE_TIMEOUT_S."""
    idle_timeout_s = float(getattr(request.module, "IDLE_TIMEOUT_S", 600.0))
    # A short lease makes the schedule look for new tenants every second, so the victim's state settles quickly.
    settings = deployment.settings(tmp_path_factory.mktemp("engram") / "data", idle_timeout_s=idle_timeout_s,
                                   lease_ttl_s=3.0)
    async with running(settings, nats_url=deployment.url) as state:
        yield state


@pytest.fixture(scope="module")
async def victim_memory(stack: Running, deployment: Deployment, tenants: Tenants) -> VictimMemory:
    """The victim's memory: a flushed conversation, stored, and two turns of another left open."""
    stored = conversation([("Ana", "My parrot is called Kiwi and she loves mornings."),
                           ("Bot", "Kiwi sounds lovely."), ("Ana", "I moved to Lisbon last spring.")],
                          conversation_id="v-stored")
    open_window = conversation([("Ana", "Tomorrow I start the pottery class."), ("Bot", "Enjoy the class!")],
                               conversation_id="v-open")
    async with await deployment.client(tenants.victim) as victim:
        await victim.publish_turns(stored)
        await victim.flush("v-stored")
        await wait_until_stored(victim, stored, timeout_s=60)
        await victim.publish_turns(open_window)
    return VictimMemory(stored=stored, open_window=open_window)

