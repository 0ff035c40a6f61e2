"""The console in a real headless Chromium, against a deployment as deploy/ ships it (TLS, a NATS account per tenant)
and `engram console` started as an operator starts it: sign-in, a LoCoMo user's timeline, a superseded fact and what
replaced it, recall with explain, live events, forget with its receipt, a tenant's seed that sees its tenant alone,
hostile text rendered inert, and the refusal to serve other machines without TLS and a token.

tests/e2e/test_console.py checks the same pages over HTTP in process. Screenshots of the pages visited go to
CONSOLE_SCREENSHOTS when set, else to a temporary folder of the run.
"""
import asyncio
import os
import secrets
import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engram_client import MemoryClient
from engram_client.contract import EntryCreated, EntryView, Turn
from services.console.app import COOKIE
from services.stack import Running, running
from shared.evaluation import locomo
from shared.messaging.nats_server import free_port
from tests.support.browser import (
    ENGRAM,
    Browser,
    ConsoleProcess,
    console_environment,
    require_browser,
    start_chromium,
    start_console,
    stop_console,
)
from tests.support.ids import unique
from tests.support.memory import store_all
from tests.support.secured import Deployment, deploy
from tests.support.turns import conversation

# Read at import: the suite's autouse fixture removes every ENGRAM_* variable before each test runs.
SCREENSHOTS = os.environ.get("CONSOLE_SCREENSHOTS")
TOKEN = secrets.token_hex(16)  # the operator's: 32 characters
LOCOMO_SESSIONS = 2  # of the first LoCoMo conversation: enough for a timeline along two days, and quick to store

MARCH = datetime(2024, 3, 4, 9, 30, tzinfo=UTC)
NOVEMBER = datetime(2024, 11, 12, 19, 0, tzinfo=UTC)
BEFORE = [("Lena", "I live in Ghent, just by the Graslei."), ("Sam", "Ghent is beautiful in spring."),
          ("Lena", "I work at Barco as a designer."), ("Sam", "Do you like the team?")]
AFTER = [("Lena", "News: I moved to Leuven last month."), ("Sam", "Leuven, nice!"),
         ("Lena", "And I work at Imec now, since October."), ("Sam", "Congratulations on the new job!")]
# Markup that would run if it were not escaped, right-to-left overrides, an unbroken run, and length: 16,000 characters.
HOSTILE = ("<script>window.pwned = 1; alert('script')</script>"
           "<img src=x onerror=\"window.pwned = 2; alert('img')\">"
           " \u202eexe.tpircs\u202c <b onmouseover=alert(3)>bold</b> \u202edesrever si siht "
           "</div></li></ul></main><script src=/static/evil.js></script> "
           + "https://example.invalid/" + "x" * 300 + " "
           + "filler \u202e " * 2000)[:16000]
PROBE = "window.pwned = 1; alert('script')"  # a part of HOSTILE that must show as text


@dataclass(frozen=True)
class Tenants:
    """The module's two tenants."""

    a: str
    b: str


@dataclass(frozen=True)
class Users:
    """Tenant A's users, each for one test, and tenant B's own."""

    moved: str      # lived in Ghent, worked at Barco; later moved to Leuven and joined Imec (consolidated)
    hostile: str    # one entry full of markup
    forgotten: str  # the forget test erases this one
    live: str       # the live test publishes for this one
    other: str      # tenant B's user


@pytest.fixture(scope="module")
def tenants() -> Tenants:
    """Fresh tenant ids for the module."""
    return Tenants(a=unique("console-a"), b=unique("console-b"))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, tenants: Tenants) -> Iterator[Deployment]:
    """deploy/nats/nats.conf running with the two tenants, each a NATS account of its own."""
    running_deployment = deploy(tmp_path_factory.mktemp("deployment"), [tenants.a, tenants.b])
    yield running_deployment
    running_deployment.stop()


@pytest.fixture(scope="module")
async def stack(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    """engram serving the deployment with its own NATS user and the tenants registry."""
    settings = deployment.settings(tmp_path_factory.mktemp("engram") / "data")
    async with running(settings, nats_url=deployment.url) as state:
        yield state


@pytest.fixture(scope="module")
async def memory_a(stack: Running, deployment: Deployment, tenants: Tenants) -> AsyncIterator[MemoryClient]:
    """Tenant A's product's client (its own NKey user, over TLS)."""
    async with await deployment.client(tenants.a) as client:
        yield client


@pytest.fixture(scope="module")
async def users(memory_a: MemoryClient, deployment: Deployment, tenants: Tenants) -> Users:
    """Tenant A's users stored (and consolidated, so Lena's old facts are superseded), and tenant B's."""
    chosen = Users(moved=unique("lena"), hostile=unique("eve"), forgotten=unique("kai"), live=unique("noor"),
                   other=unique("bo"))
    await store_all(memory_a, conversation(BEFORE, unique("c-before"), MARCH, user_id=chosen.moved)
                    + conversation(AFTER, unique("c-after"), NOVEMBER, user_id=chosen.moved)
                    + conversation([("Eve", HOSTILE), ("Sam", "ok")], unique("c-hostile"), MARCH,
                                   user_id=chosen.hostile)
                    + conversation(BEFORE, unique("c-kai"), MARCH, user_id=chosen.forgotten)
                    + conversation([("Noor", "I play the cello in an amateur orchestra."), ("Sam", "Which one?")],
                                   unique("c-noor"), MARCH, user_id=chosen.live))
    await memory_a.consolidate()
    facts = (await memory_a.entries(op="list", user_id=chosen.moved, kind="fact")).entries
    assert {f.value for f in facts if f.superseded_by} >= {"Ghent", "Barco"}, facts
    async with await deployment.client(tenants.b) as memory_b:
        await store_all(memory_b, conversation([("Bo", "I keep bees on my roof in Ostend."), ("Sam", "Honey!")],
                                               unique("c-bo"), MARCH, user_id=chosen.other))
    return chosen


@pytest.fixture(scope="module")
async def locomo_user(locomo_dir: Path, memory_a: MemoryClient) -> tuple[str, list[str]]:
    """The first two sessions of the first LoCoMo dev conversation, stored in tenant A under one user: the user id
    and the sessions' days (ISO dates)."""
    talk = locomo.load(locomo.files(locomo_dir)[0])
    sessions = talk.sessions[:LOCOMO_SESSIONS]
    await store_all(memory_a, [t for s in sessions for t in s])
    return talk.user_id, [s[0].ts.date().isoformat() for s in sessions]


@pytest.fixture(scope="module")
async def console(deployment: Deployment, tenants: Tenants, stack: Running,
                  tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ConsoleProcess]:
    """`engram console --tenant A` in a process of its own, configured as an operator configures it; stopped with
    SIGTERM (then killed) at the end."""
    env = console_environment(
        ENGRAM_NATS_URL=deployment.url, ENGRAM_NATS_NKEY_SEED_FILE=str(deployment.folder.engram_seed),
        ENGRAM_NATS_TLS_CA_FILE=str(deployment.tls_dir / "ca.pem"),
        ENGRAM_TENANTS_FILE=str(deployment.folder.registry_file), ENGRAM_CONSOLE_TOKEN=TOKEN,
        ENGRAM_LOG_LEVEL="WARNING")
    process = await start_console(["--tenant", tenants.a], env, free_port(),
                                  tmp_path_factory.mktemp("console") / "console.log")
    yield process
    await asyncio.to_thread(stop_console, process)


@pytest.fixture(scope="module")
def chromium() -> None:
    """Chromium and its driver are here (else skip, or fail with CI set); asked first, before anything starts."""
    require_browser()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go: CONSOLE_SCREENSHOTS, or a temporary folder of the run."""
    folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
async def browser(chromium: None, console: ConsoleProcess, screenshots: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Browser]:
    """One headless Chromium for the module, on the console."""
    driver = await asyncio.to_thread(start_chromium, tmp_path_factory.mktemp("chromium"))
    try:
        yield Browser(driver, console.url, screenshots)
    finally:
        await asyncio.to_thread(driver.quit)


def seed_of(deployment: Deployment, tenant: str) -> str:
    """The NKey seed `engram tenants add` made for the tenant's product: its sign-in token."""
    return deployment.folder.tenant_seed(tenant).read_text().strip()


async def entries_of(client: MemoryClient, user: str, kind: str | None = None) -> list[EntryView]:
    """The user's entries, of every state."""
    return (await client.entries(op="list", user_id=user, kind=kind, limit=500)).entries


async def stored_and_announced(client: MemoryClient, turns: list[Turn]) -> EntryCreated:
    """Store the turns of one conversation and wait for engram's entry_created event about it; that event."""
    async with await client.events("entry_created") as events:
        await store_all(client, turns)
        async with asyncio.timeout(30):
            async for event in events:
                if isinstance(event, EntryCreated) and event.conversation_id == turns[0].conversation_id:
                    return event
    raise AssertionError(f"no entry_created event for {turns[0].conversation_id}")


async def test_the_operator_signs_in_to_the_tenants_and_a_wrong_token_is_refused(
        browser: Browser, tenants: Tenants) -> None:
    """Without a session the console shows the sign-in page; a wrong token shows the failure message and starts no
    session; the operator's token opens the tenants page, listing both tenants of the registry; signing out ends
    the session."""
    await browser.sign_out()
    assert await browser.open("/") == "/signin"
    await browser.snapshot("signin")
    await browser.type("#token", "not-the-operator-token-" + "x" * 10)
    assert await browser.click("#signin") == "/signin"
    assert await browser.refusal() is None, f"the sign-in form was refused: {await browser.refusal()}"
    assert await browser.text("#signin-failed") == "That token signs in nobody."
    assert COOKIE not in await browser.cookies()
    assert await browser.sign_in(TOKEN) == "/"
    assert await browser.text("h1") == "Tenants"
    assert await browser.text("#who") == "operator"
    assert set(await browser.texts("#tenants a")) >= {tenants.a, tenants.b}
    await browser.snapshot("tenants")
    assert await browser.click("#signout") == "/signin", await browser.refusal()
    assert await browser.open(f"/t/{tenants.a}") == "/signin"


async def test_a_locomo_users_timeline_lists_their_episodes_along_time(
        browser: Browser, tenants: Tenants, locomo_user: tuple[str, list[str]]) -> None:
    """From the tenants page the operator opens tenant A, then the LoCoMo user: the timeline counts their episodes
    and lists them under the days of their two sessions, newest first."""
    user, days = locomo_user
    await browser.sign_in(TOKEN)
    assert await browser.click(f'#tenants a[href="/t/{tenants.a}"]') == f"/t/{tenants.a}"
    assert user in await browser.texts("#users a")
    await browser.snapshot("tenant")
    assert await browser.click(f'#users a[href="/t/{tenants.a}/user?id={user}"]') == f"/t/{tenants.a}/user?id={user}"
    assert await browser.text("#subject") == user
    assert "episodic" in await browser.text("#counts")
    shown_days = await browser.attributes("#history h3.day time", "datetime")
    assert set(days) <= set(shown_days) and shown_days == sorted(shown_days, reverse=True), shown_days
    episodes = await browser.attributes("#history li.entry.episodic time", "datetime")
    assert len(episodes) >= LOCOMO_SESSIONS and episodes == sorted(episodes, reverse=True), episodes
    assert {e[:10] for e in episodes} >= set(days)
    await browser.snapshot("timeline")


async def test_a_superseded_fact_links_to_the_fact_that_replaced_it(
        browser: Browser, tenants: Tenants, users: Users, memory_a: MemoryClient) -> None:
    """On Lena's timeline the Ghent fact is in the history as superseded; its page says what replaced it and links
    to the Leuven fact, whose page shows it current and names the Ghent fact as what it replaced."""
    old = next(f for f in await entries_of(memory_a, users.moved, "fact") if f.value == "Ghent")
    assert old.superseded_by
    await browser.sign_in(TOKEN)
    await browser.open(f"/t/{tenants.a}")
    await browser.click(f'#users a[href="/t/{tenants.a}/user?id={users.moved}"]')
    assert "Leuven" in await browser.text("#current") and "Ghent" not in await browser.text("#current")
    await browser.snapshot("timeline-facts")
    item = f'#history li[data-entry="{old.id}"][data-state="superseded"]'
    assert "Leuven" in await browser.text(f"{item} .chain")
    assert await browser.click(f"{item} a.open") == f"/t/{tenants.a}/entry?id={old.id}"
    assert await browser.text("#state") == "superseded"
    assert "Ghent" in await browser.text("#text")
    replaced = await browser.text("#replaced")
    assert replaced.startswith("Superseded by") and "Leuven" in replaced
    await browser.snapshot("entry")
    assert await browser.click("#replaced-by") == f"/t/{tenants.a}/entry?id={old.superseded_by}"
    assert await browser.text("#state") == "current"
    assert "Leuven" in await browser.text("#text")
    assert not await browser.texts("#replaced")
    assert "Ghent" in await browser.text(f'#replaces li[data-entry="{old.id}"]')


async def test_the_playground_recalls_with_explain_and_the_context(
        browser: Browser, tenants: Tenants, users: Users) -> None:
    """From Lena's timeline the playground opens with her id filled in; a recall (query, user, k) lists the ranked
    entries with their dense and BM25 ranks, and the context with its token count."""
    await browser.sign_in(TOKEN)
    await browser.open(f"/t/{tenants.a}/user?id={users.moved}")
    assert await browser.click("#recall-as") == f"/t/{tenants.a}/recall?user={users.moved}"
    assert await browser.script("return document.getElementById('user_id').value") == users.moved
    await browser.type("#query", "Where does Lena live now?")
    await browser.type("#k", "3")
    assert await browser.click("#run") == f"/t/{tenants.a}/recall"
    summary = await browser.text("#recall-summary")
    ranked = await browser.texts("#ranked > li")
    assert 1 <= len(ranked) <= 3 and summary.startswith(f"{len(ranked)} entries"), summary
    assert "Leuven" in "\n".join(ranked)
    dense, sparse = await browser.texts("#ranked td.dense"), await browser.texts("#ranked td.sparse")
    assert len(dense) == len(sparse) == len(ranked)
    assert all(r.startswith("#") or r == "not found" for r in dense + sparse), (dense, sparse)
    assert any(r.startswith("#") for r in dense) and any(r.startswith("#") for r in sparse), (dense, sparse)
    tokens = await browser.text("#context-tokens")
    assert tokens.endswith(" tokens") and int(tokens.split()[0]) > 0, tokens
    assert "Leuven" in await browser.text("#context")
    assert f"context {tokens.split()[0]} tokens" in summary
    await browser.snapshot("recall")


async def test_new_entries_appear_in_the_live_panel_without_reloading(
        browser: Browser, tenants: Tenants, users: Users, memory_a: MemoryClient) -> None:
    """With Noor's timeline open, turns published and flushed for her show up as an entry_created line in the live
    panel, naming her, while the page stays loaded."""
    await browser.sign_in(TOKEN)
    await browser.open(f"/t/{tenants.a}/user?id={users.live}")
    await browser.wait_for("#live-status", "listening")
    await browser.script("window.stillHere = 'yes'")
    talk = unique("c-noor-live")
    await store_all(memory_a, conversation([("Noor", "Our orchestra plays Dvořák's ninth in June."),
                                            ("Sam", "I will come and listen.")], talk, NOVEMBER, user_id=users.live))
    line = await browser.wait_for('#live li[data-kind="entry_created"]', talk)
    assert "new entry" in line and f"(user {users.live})" in line, line
    assert await browser.script("return window.stillHere") == "yes"
    assert browser.path() == f"/t/{tenants.a}/user?id={users.live}"


async def test_forgetting_a_user_needs_the_typed_id_and_leaves_nothing(
        browser: Browser, tenants: Tenants, users: Users, memory_a: MemoryClient) -> None:
    """From Kai's timeline, forget asks for the user id typed out; once given, the receipt says Verified, and Kai
    is gone from the tenant page, the timeline shows nothing stored, and recall for Kai returns no entry."""
    user = users.forgotten
    assert await entries_of(memory_a, user)
    await browser.sign_in(TOKEN)
    await browser.open(f"/t/{tenants.a}/user?id={user}")
    assert await browser.click("#forget") == f"/t/{tenants.a}/forget?user={user}"
    assert await browser.text("#target") == user
    assert "episodic" in await browser.text("#what-goes")
    await browser.snapshot("forget")
    await browser.type("#confirm", user)
    assert await browser.click("#confirm-forget") == f"/t/{tenants.a}/forget"
    assert (await browser.text("#verified")).startswith("Verified")
    assert int(await browser.text("#receipt .deleted-entries")) > 0
    await browser.snapshot("receipt")
    assert await entries_of(memory_a, user) == []
    await browser.open(f"/t/{tenants.a}")
    assert user not in await browser.texts("#users a") and users.moved in await browser.texts("#users a")
    await browser.open(f"/t/{tenants.a}/user?id={user}")
    assert "nothing stored" in await browser.text("#counts")
    assert not await browser.texts("#history li.entry")
    await browser.open(f"/t/{tenants.a}/recall?user={user}")
    await browser.type("#query", "Where does Kai live and work?")
    await browser.click("#run")
    assert (await browser.text("#recall-summary")).startswith("0 entries")
    assert not await browser.texts("#ranked > li")


async def test_a_tenants_seed_sees_nothing_of_another_tenant(
        browser: Browser, tenants: Tenants, users: Users, deployment: Deployment, memory_a: MemoryClient) -> None:
    """Signed in with tenant B's seed, the home page is B's tenant page, listing B's user and none of A's; A's
    tenant page, A's user timeline and A's entries (under A's or B's address) are the not-found page; and while A
    stores new memory, B's live panel shows B's own events only."""
    a_entry = (await entries_of(memory_a, users.moved))[0]
    assert await browser.sign_in(seed_of(deployment, tenants.b)) == f"/t/{tenants.b}"
    assert await browser.text("#who") == f"tenant {tenants.b}"
    listed = await browser.texts("#users a")
    assert listed == [users.other], listed
    await browser.assert_not_found(f"/t/{tenants.a}")
    await browser.assert_not_found(f"/t/{tenants.a}/user?id={users.moved}")
    await browser.assert_not_found(f"/t/{tenants.a}/entry?id={a_entry.id}")
    await browser.assert_not_found(f"/t/{tenants.b}/entry?id={a_entry.id}")
    await browser.assert_not_found(f"/t/{tenants.a}/recall")
    await browser.assert_not_found(f"/t/{tenants.a}/events")
    assert await browser.open("/?tenant=" + tenants.a) == f"/t/{tenants.b}"

    await browser.wait_for("#live-status", "listening")
    a_user, a_talk, b_talk = unique("ana"), unique("c-a-live"), unique("c-b-live")
    a_event = await stored_and_announced(memory_a, conversation([("Ana", "I adopted a grey cat called Miso.")],
                                                                a_talk, NOVEMBER, user_id=a_user))
    # B's memory is stored after A's event went out: were A's events relayed to B, it would be on the panel by now.
    async with await deployment.client(tenants.b) as memory_b:
        await stored_and_announced(memory_b, conversation([("Bo", "The bees swarmed this morning.")], b_talk,
                                                          NOVEMBER, user_id=users.other))
    await browser.wait_for('#live li[data-kind="entry_created"]', b_talk)
    lines = await browser.texts("#live li")
    leaked = [line for line in lines if a_talk in line or a_user in line or a_event.entry_id[:8] in line]
    assert not leaked, lines
    await browser.sign_out()


async def test_hostile_text_renders_inert_and_in_full(
        browser: Browser, tenants: Tenants, users: Users, memory_a: MemoryClient) -> None:
    """An entry of 16,000 characters with script tags, an image's onerror handler and right-to-left overrides runs
    nothing on Eve's timeline or on its own page (no dialog, window.pwned undefined, no script but the console's),
    shows all of its text on its page, and makes neither page wider than the window."""
    entry = next(e for e in await entries_of(memory_a, users.hostile) if PROBE in e.text)
    await browser.sign_in(TOKEN)
    for path in (f"/t/{tenants.a}/user?id={users.hostile}", f"/t/{tenants.a}/entry?id={entry.id}"):
        await browser.open(path)
        assert PROBE in await browser.text(f'li[data-entry="{entry.id}"] .text, #text'), path
        assert await browser.alert() is None, path
        assert await browser.script("return typeof window.pwned") == "undefined", path
        scripts = await browser.script("return Array.from(document.scripts, s => s.src)")
        assert scripts == [browser.base_url + "/static/console.js"], (path, scripts)
        assert await browser.script("return document.querySelectorAll('img, b[onmouseover]').length") == 0, path
        assert await browser.overflow() <= 1, f"{path} is wider than the window"
    assert await browser.script("return document.getElementById('text').textContent") == entry.text
    assert HOSTILE in entry.text
    await browser.snapshot("hostile")


async def test_the_console_refuses_other_machines_without_tls_and_a_token() -> None:
    """`engram console --host 0.0.0.0` with neither a token nor TLS exits 2, naming both as missing."""
    process = await asyncio.create_subprocess_exec(
        str(ENGRAM), "console", "--host", "0.0.0.0", "--port", str(free_port()), env=console_environment(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGKILL)
            await process.wait()
    said = " ".join(out.decode().split())
    assert process.returncode == 2, said
    assert "refusing to serve the console on --host '0.0.0.0'" in said, said
    assert "TLS (--tls-cert, --tls-key)" in said and "a token (ENGRAM_CONSOLE_TOKEN or --token-file)" in said, said


async def test_signing_out_in_one_tab_stops_the_live_panel_of_another(
        browser: Browser, tenants: Tenants, memory_a: MemoryClient) -> None:
    """Signing out ends the session everywhere: a tab of the same browser that had tenant A's live panel open
    receives none of the events of memory stored after the sign-out."""
    await browser.sign_in(TOKEN)
    await browser.open(f"/t/{tenants.a}")
    await browser.wait_for("#live-status", "listening")
    first = await browser.new_tab()
    try:
        await browser.open(f"/t/{tenants.a}")
        await browser.sign_out()
        assert await browser.open(f"/t/{tenants.a}") == "/signin"
    finally:
        await browser.only_tab(first)
    user, after, later = unique("ana"), unique("c-after-signout"), unique("c-later")
    for talk in (after, later):
        await stored_and_announced(memory_a, conversation([("Ana", f"Note {talk}: the plants need water.")], talk,
                                                          NOVEMBER, user_id=user))
    # The console had the first event before the second was stored: a relay would have shown it by now.
    lines = await browser.texts("#live li")
    assert not [line for line in lines if after in line or later in line], lines
