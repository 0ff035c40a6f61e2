"""The console (services/console) over HTTP, in process, against the real stack: sign-in, the timeline with its
supersession chains, recall with explain, export, forget with its confirmation and receipt, CSRF and the security
headers on every response. Browser tests (tests/e2e/test_console_browser.py) drive the same pages in Chromium."""
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from urllib.parse import quote

import httpx
import pytest
from pydantic import SecretStr

from engram_client import MemoryClient, connection
from engram_client.security import ANONYMOUS
from services.console.app import COOKIE, CSP, LOOPBACK_HOSTS, build, console_for
from services.console.signin import SignIn
from services.stack import Running
from tests.support.ids import unique
from tests.support.memory import store_all
from tests.support.turns import conversation

TOKEN = "operator-token-for-the-console-tests"
MAY = datetime(2024, 5, 6, 10, 0, tzinfo=UTC)
OCTOBER = datetime(2024, 10, 7, 18, 0, tzinfo=UTC)
SPRING = [("Mira", "I live in Utrecht, right by the old canal."), ("Tom", "Utrecht is lovely."),
          ("Mira", "I work at Philips as an engineer."), ("Tom", "Good team?")]
AUTUMN = [("Mira", "Big change: I moved to Rotterdam last month."), ("Tom", "Rotterdam, wow!"),
          ("Mira", "And I work at ASML now, since September."), ("Tom", "Congratulations!")]
HOSTILE = ("<script>window.pwned=1</script><img src=x onerror=alert(1)> \u202eevil\u202c " + "long " * 3200)[:16000]


@pytest.fixture(scope="module")
async def seeded(stack: Running) -> AsyncIterator[tuple[str, MemoryClient]]:
    """A tenant where Mira moved and changed jobs (consolidated, so facts were superseded), and a hostile text."""
    tenant = unique("console")
    async with await MemoryClient.connect(stack.nats_url, tenant) as client:
        await store_all(client, conversation(SPRING, "c-spring", MAY, user_id="mira") +
                        conversation(AUTUMN, "c-autumn", OCTOBER, user_id="mira") +
                        conversation([("Eve", HOSTILE), ("Tom", "ok")], "c-hostile", OCTOBER, user_id="eve"))
        await client.consolidate()
        yield tenant, client


@pytest.fixture(scope="module")
async def web(stack: Running) -> AsyncIterator[httpx.AsyncClient]:
    """The console app in process (no lifespan needed), with its operator connection to the stack."""
    nc = await connection.connect(stack.nats_url, "console-test")
    console = console_for(SignIn(SecretStr(TOKEN), None, ANONYMOUS), nc, stack.nats_url, "mem", secure_cookies=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build(console)),
                                 base_url="http://console.test") as web_client:
        yield web_client
    await console.sessions.close()
    await connection.close(nc)


async def signed_in(web: httpx.AsyncClient, token: str = TOKEN) -> httpx.Response:
    web.cookies.clear()
    form = await web.get("/signin")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf
    return await web.post("/signin", data={"csrf": csrf.group(1), "token": token})


def csrf_of(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, page.text[:500]
    return found.group(1)


async def test_pages_need_a_session_and_a_wrong_token_signs_in_nobody(web: httpx.AsyncClient,
                                                                      seeded: tuple[str, MemoryClient]) -> None:
    """Without a session every page redirects to sign-in; a wrong token is answered 401 and sets no session."""
    tenant, _ = seeded
    web.cookies.clear()
    for path in ("/", f"/t/{tenant}", f"/t/{tenant}/user?id=mira", f"/t/{tenant}/recall", f"/t/{tenant}/events"):
        response = await web.get(path)
        assert response.status_code == 303 and response.headers["location"] == "/signin", path
    refused = await signed_in(web, "not-the-token-at-all-really")
    assert refused.status_code == 401 and "signs in nobody" in refused.text
    assert COOKIE not in web.cookies


async def test_sign_in_without_its_csrf_token_is_refused(web: httpx.AsyncClient) -> None:
    """The sign-in form's CSRF token must match its cookie: a forged sign-in post is refused."""
    web.cookies.clear()
    response = await web.post("/signin", data={"csrf": "forged", "token": TOKEN})
    assert response.status_code == 403 and COOKIE not in web.cookies


async def test_every_response_carries_the_security_headers(web: httpx.AsyncClient,
                                                           seeded: tuple[str, MemoryClient]) -> None:
    """Pages, static files, errors and redirects all carry the strict CSP, nosniff, no framing and no caching."""
    tenant, _ = seeded
    assert (await signed_in(web)).status_code == 303
    for path in ("/", f"/t/{tenant}", "/static/console.css", "/static/console.js", "/nowhere", "/signin"):
        response = await web.get(path)
        assert response.headers["content-security-policy"] == CSP, path
        assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY" and response.headers["cache-control"] == "no-store"


async def test_the_timeline_shows_the_current_state_apart_and_chains_what_replaced_what(
        web: httpx.AsyncClient, seeded: tuple[str, MemoryClient]) -> None:
    """The tenant lists Mira; her timeline puts the current facts (Rotterdam, ASML) under Now and the replaced ones
    in the history, each linking to the fact that superseded it; the old fact's page names its replacement."""
    tenant, client = seeded
    await signed_in(web)
    tenant_page = await web.get(f"/t/{tenant}")
    assert tenant_page.status_code == 200 and "/user?id=mira" in tenant_page.text and "c-autumn" in tenant_page.text
    page = await web.get(f"/t/{tenant}/user?id=mira")
    assert page.status_code == 200
    now = page.text.split('id="current"')[1].split('id="history"')[0]
    assert "Rotterdam" in now and "ASML" in now and "Utrecht" not in now
    facts = (await client.entries(op="list", user_id="mira", kind="fact", limit=500)).entries
    old = next(f for f in facts if f.value == "Utrecht")
    assert old.superseded_by
    history = page.text.split('id="history"')[1]
    assert f'data-entry="{old.id}" data-state="superseded"' in history
    assert f"/entry?id={old.superseded_by}" in history
    entry = await web.get(f"/t/{tenant}/entry?id={old.id}")
    assert entry.status_code == 200 and 'id="replaced"' in entry.text and "Rotterdam" in entry.text
    assert f"/entry?id={old.superseded_by}" in entry.text
    newer = await web.get(f"/t/{tenant}/entry?id={old.superseded_by}")
    assert newer.status_code == 200 and 'id="replaces"' in newer.text
    assert "Utrecht" in newer.text.split('id="replaces"')[1]


async def test_recall_shows_explain_and_the_context_with_its_tokens(web: httpx.AsyncClient,
                                                                    seeded: tuple[str, MemoryClient]) -> None:
    """A recall from the playground lists the ranked entries with their dense and BM25 ranks, and the context with
    its token count; a query that is not valid is answered with the contract's reason."""
    tenant, _ = seeded
    await signed_in(web)
    form = await web.get(f"/t/{tenant}/recall?user=mira")
    response = await web.post(f"/t/{tenant}/recall", data={
        "csrf": csrf_of(form), "query": "Where does Mira live now?", "user_id": "mira", "k": "5", "mode": "fast"})
    assert response.status_code == 200
    assert 'class="dense"' in response.text and 'class="sparse"' in response.text
    assert "Rotterdam" in response.text.split('id="ranked"')[1]
    tokens = re.search(r'id="context-tokens">(\d+) tokens', response.text)
    assert tokens and int(tokens.group(1)) > 0
    bad = await web.post(f"/t/{tenant}/recall", data={"csrf": csrf_of(form), "query": "x", "k": "99999"})
    assert bad.status_code == 200 and 'id="problem"' in bad.text and "k:" in bad.text


async def test_hostile_text_is_escaped(web: httpx.AsyncClient, seeded: tuple[str, MemoryClient]) -> None:
    """A 16,000-character entry with script, an image handler and right-to-left marks comes back escaped, in its
    own isolated block, on the timeline and on its page."""
    tenant, client = seeded
    await signed_in(web)
    page = await web.get(f"/t/{tenant}/user?id=eve")
    assert "<script>window.pwned" not in page.text and "&lt;script&gt;window.pwned" in page.text
    assert "<img src=x" not in page.text
    entry_id = (await client.entries(op="list", user_id="eve", limit=10)).entries[0].id
    entry = await web.get(f"/t/{tenant}/entry?id={entry_id}")
    assert "<script>window.pwned" not in entry.text and "onerror=alert(1)&gt;" in entry.text


async def test_export_downloads_the_users_memory(web: httpx.AsyncClient, seeded: tuple[str, MemoryClient]) -> None:
    """Export gives a JSON Lines file: a header, then Mira's entries only."""
    tenant, _ = seeded
    await signed_in(web)
    response = await web.get(f"/t/{tenant}/export?user=mira")
    assert response.status_code == 200 and "attachment" in response.headers["content-disposition"]
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert lines and "Rotterdam" in response.text and "pwned" not in response.text


async def test_forget_needs_the_csrf_token_and_the_typed_confirmation_then_shows_the_receipt(
        web: httpx.AsyncClient, stack: Running) -> None:
    """A forget post without the session's CSRF token, or from another origin, or with the wrong confirmation,
    deletes nothing; the confirmed one returns a verified receipt and the user is gone from every page."""
    tenant = unique("forget")
    async with await MemoryClient.connect(stack.nats_url, tenant) as client:
        await store_all(client, conversation(SPRING, "c-1", MAY, user_id="kai"))
        await signed_in(web)
        confirm = await web.get(f"/t/{tenant}/forget?user=kai")
        assert confirm.status_code == 200 and "episodic" in confirm.text and 'id="target">kai' in confirm.text
        csrf = csrf_of(confirm)
        assert (await web.post(f"/t/{tenant}/forget", data={"user": "kai", "confirm": "kai"})).status_code == 403
        assert (await web.post(f"/t/{tenant}/forget", data={"csrf": "x" * 43, "user": "kai",
                                                               "confirm": "kai"})).status_code == 403
        other_origin = await web.post(f"/t/{tenant}/forget", data={"csrf": csrf, "user": "kai", "confirm": "kai"},
                                      headers={"origin": "https://evil.example"})
        assert other_origin.status_code == 403
        mismatch = await web.post(f"/t/{tenant}/forget", data={"csrf": csrf, "user": "kai", "confirm": "ka"})
        assert mismatch.status_code == 400 and 'id="mismatch"' in mismatch.text
        assert (await client.entries(op="list", user_id="kai")).entries
        receipt = await web.post(f"/t/{tenant}/forget", data={"csrf": csrf, "user": "kai", "confirm": "kai"})
        assert receipt.status_code == 200 and "Verified" in receipt.text
        assert (await client.entries(op="list", user_id="kai")).entries == []
        for path in (f"/t/{tenant}", f"/t/{tenant}/user?id=kai", f"/t/{tenant}/conversation?id=c-1"):
            assert "Utrecht" not in (await web.get(path)).text
        assert "/user?id=kai" not in (await web.get(f"/t/{tenant}")).text


async def test_ids_the_contract_refuses_are_pages_that_do_not_exist(web: httpx.AsyncClient) -> None:
    """A tenant, user or entry id the contract would refuse is a 404 page, never an error trace."""
    await signed_in(web)
    for path in ("/t/_bad tenant", "/t/ok/user?id=" + quote("a b"), "/t/ok/entry?id=not-a-uuid",
                 "/t/ok/user", "/t/ok/forget"):
        response = await web.get(path)
        assert response.status_code == 404 and "Traceback" not in response.text, path


async def test_an_oversized_body_and_a_foreign_host_are_refused_before_anything_reads_them(
        stack: Running, web: httpx.AsyncClient) -> None:
    """A sign-in post of a megabyte is refused 413 (no session needed, nothing parsed), with the security headers;
    a console on loopback answers only loopback host names, so a page elsewhere cannot reach it through a name it
    rebinds to 127.0.0.1."""
    web.cookies.clear()
    big = await web.post("/signin", content=b"token=" + b"x" * (2 * 1024 * 1024),
                         headers={"content-type": "application/x-www-form-urlencoded"})
    assert big.status_code == 413 and big.headers["content-security-policy"] == CSP
    nc = await connection.connect(stack.nats_url, "console-hosts")
    console = console_for(SignIn(SecretStr(TOKEN), None, ANONYMOUS), nc, stack.nats_url, "mem", secure_cookies=False,
                          allowed_hosts=LOOPBACK_HOSTS)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build(console)),
                                 base_url="http://127.0.0.1:8780") as local:
        assert (await local.get("/signin")).status_code == 200
        rebound = await local.get("/signin", headers={"host": "rebind.attacker.example:8780"})
        assert rebound.status_code == 400 and rebound.headers["content-security-policy"] == CSP
    await connection.close(nc)
