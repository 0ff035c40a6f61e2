"""The console against a hostile product, on the deployment deploy/ ships: the attacker signs in with its own NKey seed
and tries every console page and form on the victim's tenant; even past the console's own check, the connection its
session holds is the attacker's NATS user, which reaches nothing of the victim's. Seeds the registry does not list
and repeated guessing are refused."""
import re
from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import SecretStr

from engram_client import MemoryClient, connection
from engram_client.errors import EngramError
from engram_client.security import NatsSecurity
from services.console.app import COOKIE, Console, build, console_for
from services.console.signin import FAILURES_PER_MINUTE, SignIn
from services.stack import Running
from shared.tenancy.nkeys import new_user
from tests.support.attack import Tenants, VictimMemory
from tests.support.secured import Deployment

TOKEN = "the-console-operator-token-for-attacks"
VICTIM_WORDS = ("Kiwi", "Lisbon")


@pytest.fixture(scope="module")
async def console(deployment: Deployment, stack: Running) -> AsyncIterator[Console]:
    """The console as `engram console` builds it on this deployment: engram's identity for the operator, the
    registry for the tenants' seeds, TLS for every connection."""
    nc = await connection.connect(deployment.url, "console-attack", security=deployment.engram_security())
    state = console_for(SignIn(SecretStr(TOKEN), deployment.folder.registry_file,
                               NatsSecurity(tls=deployment.tls())), nc, deployment.url, "mem", secure_cookies=True)
    yield state
    await state.sessions.close()
    await connection.close(nc)


@pytest.fixture
async def web(console: Console) -> AsyncIterator[httpx.AsyncClient]:
    """A browser of the console (over https, as the cookies are Secure)."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build(console)),
                                 base_url="https://console.test") as client:
        yield client


async def sign_in(web: httpx.AsyncClient, token: str) -> httpx.Response:
    form = await web.get("/signin")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf
    return await web.post("/signin", data={"csrf": csrf.group(1), "token": token})


def seed(deployment: Deployment, tenant: str) -> str:
    return deployment.folder.tenant_seed(tenant).read_text().strip()


async def test_a_product_signed_in_with_its_seed_sees_nothing_of_another_tenant(
        web: httpx.AsyncClient, deployment: Deployment, tenants: Tenants, victim_memory: VictimMemory) -> None:
    """The attacker's seed opens the attacker's tenant only: every page, form, download and event stream of the
    victim's tenant answers the not-found page, and the victim's memory is whole afterwards."""
    victim = tenants.victim
    async with await deployment.client(victim) as client:
        before = (await client.entries(op="list", limit=500)).entries
    assert before
    signed = await sign_in(web, seed(deployment, tenants.attacker))
    assert signed.status_code == 303 and COOKIE in web.cookies
    home = await web.get("/")
    assert home.headers["location"] == f"/t/{tenants.attacker}"
    page = await web.get(home.headers["location"])
    assert page.status_code == 200 and not any(w in page.text for w in VICTIM_WORDS)
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    entry = before[0]
    gets = [f"/t/{victim}", f"/t/{victim}/user?id={entry.user_id or 'u1'}",
            f"/t/{victim}/conversation?id={entry.conversation_id}", f"/t/{victim}/entry?id={entry.id}",
            f"/t/{victim}/recall", f"/t/{victim}/forget?conversation={entry.conversation_id}",
            f"/t/{victim}/export?user={entry.user_id or 'u1'}", f"/t/{victim}/events"]
    for path in gets:
        response = await web.get(path, follow_redirects=True)
        assert response.status_code == 404, path
        assert not any(w in response.text for w in VICTIM_WORDS), path
    # Asking the home page for the victim's tenant lands on the attacker's own.
    assert (await web.get(f"/?tenant={victim}")).headers["location"] == f"/t/{tenants.attacker}"
    posts = [(f"/t/{victim}/recall", {"query": "Where does the victim live?"}),
             (f"/t/{victim}/forget", {"conversation": entry.conversation_id, "confirm": entry.conversation_id})]
    for path, data in posts:
        response = await web.post(path, data={"csrf": csrf.group(1), **data})
        assert response.status_code == 404, path
        assert not any(w in response.text for w in VICTIM_WORDS), path
    # The entry id of another tenant, asked in the attacker's own tenant, is simply not found.
    assert (await web.get(f"/t/{tenants.attacker}/entry?id={entry.id}")).status_code == 404
    async with await deployment.client(victim) as client:
        after = (await client.entries(op="list", limit=500)).entries
    assert {e.id for e in after} == {e.id for e in before}


async def test_the_sessions_own_connection_reaches_nothing_of_the_victim(
        web: httpx.AsyncClient, console: Console, deployment: Deployment, tenants: Tenants,
        victim_memory: VictimMemory) -> None:
    """Even were the console's tenant check gone, the attacker's session talks to NATS as the attacker's product:
    a recall, listing or forget on the victim's subjects through that connection gets no answer."""
    await sign_in(web, seed(deployment, tenants.attacker))
    session = console.sessions.get(web.cookies[COOKIE])
    assert session is not None and session.access.tenant == tenants.attacker and session.owns_connection
    sneaky = MemoryClient(session.nc, tenants.victim, "mem", timeout_s=2.0)
    for attempt in (sneaky.recall("Kiwi"), sneaky.entries(op="list"), sneaky.forget(conversation_id="v-stored")):
        with pytest.raises(EngramError):
            await attempt
    async with await deployment.client(tenants.victim) as client:
        assert (await client.entries(op="list", conversation_id="v-stored")).entries


async def test_seeds_the_registry_does_not_list_and_guessing_sign_in_nobody(
        web: httpx.AsyncClient, deployment: Deployment, tenants: Tenants) -> None:
    """A well-formed seed of no tenant, an account or operator seed, a prefix of the token and the system account's
    seed are refused; after FAILURES_PER_MINUTE failures even the right token waits."""
    fresh_user_seed = _new_user_seed()
    guesses = [fresh_user_seed, deployment.folder.system_seed.read_text().strip(), TOKEN[:-1], TOKEN + "x",
               "SU" + "A" * 56, seed(deployment, tenants.victim)[:-2]]
    for guess in guesses:
        response = await sign_in(web, guess)
        assert response.status_code == 401 and COOKIE not in web.cookies
    for _ in range(FAILURES_PER_MINUTE - len(guesses)):
        await sign_in(web, "wrong-but-long-enough-token")
    assert (await sign_in(web, TOKEN)).status_code == 429


def _new_user_seed() -> str:
    return new_user().seed.decode()
