"""deploy/nats/nats.conf on a real nats-server: each product stays inside its tenant, engram serves them all.

The server runs the committed file, rendered into a temp copy that changes only the JetStream store folder (given
on the launcher's command line instead) and the monitoring port, with the users' passwords in its environment.
Violations are checked on both sides: the client's error callback and the server's own log.
"""
import logging
import re
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import NoServersError
from nats.errors import TimeoutError as NatsTimeout
from pydantic import SecretStr

from engram_client import MemoryClient, connection
from engram_client.contract import RecallResponse
from engram_client.errors import Unavailable
from engram_client.security import NatsSecurity
from services.stack import running
from shared.messaging import nats_server, streams
from shared.settings import Settings
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.turns import conversation

CONF = Path(__file__).parents[2] / "deploy" / "nats" / "nats.conf"
USERS = ("engram", "acme", "globex", "sys")
DENIED_TO_ACME = ["mem.globex.>", "mem.globex.recall", "_INBOX_globex.>", "_INBOX.>", "mem.>", "mem.acme.recall",
                  "$JS.API.>", "mem.dlq.>"]


@dataclass
class Nats:
    """A nats-server running deploy/nats/nats.conf, and its users' passwords."""

    server: nats_server.EmbeddedNats
    passwords: dict[str, str]

    @property
    def url(self) -> str:
        """The client URL."""
        return self.server.url

    def log(self) -> str:
        """What the server logged so far."""
        return (self.server.store_dir / "nats-server.log").read_text(errors="replace")

    def violations(self, user: str) -> list[str]:
        """The server's log lines of permission violations by `user`."""
        return [line for line in self.log().splitlines() if "Violation" in line and f'/user:{user}"' in line]

    async def logged_violation(self, user: str, subject: str) -> None:
        """Wait until the server logged a violation of `user` on `subject`."""
        await eventually(lambda: self.violations(user),
                         lambda lines: any(f'Subject "{subject}"' in line for line in lines), timeout_s=5)


def _start(folder: Path) -> Nats:
    text = CONF.read_text()
    text, monitor = re.subn(r"^http_port: 8222\b", f"http_port: {nats_server.free_port()}", text, flags=re.MULTILINE)
    # The launcher names the store on the command line, and nats-server refuses a second store_dir in the file.
    text, store = re.subn(r'^\s*store_dir: "/data/jetstream"\n', "", text, flags=re.MULTILINE)
    assert monitor == store == 1, "deploy/nats/nats.conf changed shape; update the rendering here"
    folder.mkdir(parents=True, exist_ok=True)
    rendered = folder / "nats.conf"
    rendered.write_text(text)
    # Letters and digits only, as deploy/nats/README.md asks: the server parses the variable's value as a token.
    passwords = {user: f"pw{secrets.token_hex(16)}" for user in USERS}
    with pytest.MonkeyPatch.context() as env:
        for user, password in passwords.items():
            env.setenv(f"NATS_{user.upper()}_PASSWORD", password)
        server = nats_server.start(folder / "jetstream", config=rendered)  # the server copies this environment
    return Nats(server=server, passwords=passwords)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nats]:
    """One server for the module's permission checks (the stack test starts its own)."""
    running_server = _start(tmp_path_factory.mktemp("nats-permissions"))
    yield running_server
    running_server.server.stop()


@dataclass
class Connection:
    """A raw nats-py connection as one user, with what its error callback saw."""

    nc: Client
    errors: list[str] = field(default_factory=list)

    async def violation(self, kind: str, subject: str, timeout_s: float = 5.0) -> None:
        """Wait until the server reported `Permissions Violation for <kind> to "<subject>"` to this client."""
        wanted = f'permissions violation for {kind} to "{subject}"'.lower()  # nats-py lowercases -ERR texts
        await eventually(lambda: self.errors, lambda errors: any(wanted in e.lower() for e in errors),
                         timeout_s=timeout_s)


async def _subscribed(nc: Client) -> None:
    """Return once the server holds every subscription made so far on `nc`.

    One flush is not enough with nats-py 2.16: its PING goes straight to the socket, ahead of a SUB still waiting in
    the write buffer, so the PONG can come back before the server saw the SUB. The first flush pushes the buffer out;
    the second PING follows it.
    """
    await nc.flush()
    await nc.flush()


async def _connect(nats_: Nats, user: str, inbox_prefix: str | None = None, attempts: int = 3) -> Connection:
    """Connect as `user`, trying again on a busy machine (nats-py's connect gives up after one 2 s timeout by
    default, and the error it raises, "no servers available", hides why: the error callback saw it)."""
    holder = Connection(nc=Client())

    async def on_error(exc: Exception) -> None:
        holder.errors.append(f"{type(exc).__name__}: {exc}")

    for _ in range(attempts):
        try:
            await holder.nc.connect(nats_.url, user=user, password=nats_.passwords[user], name=f"test-{user}",
                                    inbox_prefix=inbox_prefix or "_INBOX", error_cb=on_error, allow_reconnect=False,
                                    connect_timeout=10)
            return holder
        except NoServersError:
            holder.nc = Client()
    raise AssertionError(f"cannot connect to {nats_.url} as {user!r}: {holder.errors}")


@pytest.fixture(scope="module")
async def engram(server: Nats) -> AsyncIterator[Connection]:
    """engram's own user, with the streams engram creates."""
    conn = await _connect(server, "engram")
    await streams.ensure(conn.nc.jetstream(), "mem")
    yield conn
    await conn.nc.close()


@pytest.fixture
async def acme(server: Nats, engram: Connection) -> AsyncIterator[Connection]:
    """Tenant acme's product, connected with its own inbox prefix."""
    conn = await _connect(server, "acme", inbox_prefix="_INBOX_acme")
    yield conn
    await conn.nc.close()


@pytest.fixture
async def globex(server: Nats, engram: Connection) -> AsyncIterator[Connection]:
    """Tenant globex's product, connected with its own inbox prefix."""
    conn = await _connect(server, "globex", inbox_prefix="_INBOX_globex")
    yield conn
    await conn.nc.close()


async def _responder(engram: Connection, subject: str, seen: list[Msg]) -> None:
    async def answer(msg: Msg) -> None:
        seen.append(msg)
        await msg.respond(b"answer:" + msg.data)

    await engram.nc.subscribe(subject, cb=answer)
    await _subscribed(engram.nc)


async def test_no_one_gets_in_without_a_password(server: Nats) -> None:
    """The server refuses a connection with no credentials and one with a product's name and a wrong password."""
    with pytest.raises(Unavailable):
        await connection.connect(server.url, "anonymous", first_connect_timeout_s=2)
    with pytest.raises(Unavailable):
        await connection.connect(server.url, "guessing", first_connect_timeout_s=2,
                                 security=NatsSecurity(user="acme", password="wrong", inbox_prefix="_INBOX_acme"))


async def test_a_product_publishes_its_turns_through_jetstream(acme: Connection, engram: Connection) -> None:
    """A product may publish its own turns and flushes through JetStream and gets acknowledgements from the turns
    stream, with no violation."""
    js = acme.nc.jetstream()
    ack = await js.publish("mem.acme.turns", b"{}", headers={"Nats-Msg-Id": unique("acme:c:")}, timeout=5)
    assert ack.stream == "MEM_TURNS"
    flushed = await js.publish("mem.acme.flush", b"{}", timeout=5)
    assert flushed.stream == "MEM_TURNS" and flushed.seq > ack.seq
    assert acme.errors == []


async def test_a_product_requests_and_gets_engrams_answer_on_its_own_inbox(acme: Connection,
                                                                           engram: Connection) -> None:
    """A product's request to its own recall subject is answered by engram on the product's own inbox prefix."""
    seen: list[Msg] = []
    await _responder(engram, "mem.acme.recall", seen)
    reply = await acme.nc.request("mem.acme.recall", b"q1", timeout=5)
    assert reply.data == b"answer:q1"
    assert seen[0].reply.startswith("_INBOX_acme.")
    assert acme.errors == [] and engram.errors == []


async def test_a_product_cannot_publish_into_another_tenant(server: Nats, acme: Connection,
                                                            engram: Connection) -> None:
    """A product's publishes and requests to another tenant, and forged events in its own tenant, are refused by the
    server, and none reaches a subscriber or the stream."""
    received: list[str] = []

    async def record(msg: Msg) -> None:
        received.append(msg.subject)

    # A connection of its own: a second subscription matching a request on the responding connection would spend
    # that request's one allowed response (allow_responses counts deliveries).
    tap = await _connect(server, "engram")
    await tap.nc.subscribe("mem.>", cb=record)
    await _subscribed(tap.nc)
    with pytest.raises(NatsTimeout):  # the server drops the message: no stream stores it, so no PubAck comes
        await acme.nc.jetstream().publish("mem.globex.turns", b"{}", timeout=1)
    await acme.violation("publish", "mem.globex.turns")
    with pytest.raises(NatsTimeout):
        await acme.nc.request("mem.globex.recall", b"q", timeout=1)
    await acme.violation("publish", "mem.globex.recall")
    await acme.nc.publish("mem.acme.events.entry_created", b"forged")  # engram's events are engram's to send
    await acme.violation("publish", "mem.acme.events.entry_created")
    # One publisher's messages reach a subscriber in order: once this marker is in, anything before it would be.
    await acme.nc.publish("mem.acme.probe", b"marker")
    await eventually(lambda: received, lambda r: "mem.acme.probe" in r, timeout_s=5)
    await tap.nc.close()
    assert received == ["mem.acme.probe"]
    info = await engram.nc.jetstream().stream_info("MEM_TURNS", subjects_filter="mem.globex.>")
    assert not info.state.subjects
    await server.logged_violation("acme", "mem.globex.turns")


@pytest.mark.parametrize("subject", DENIED_TO_ACME)
async def test_a_product_cannot_subscribe_outside_its_tenant_and_inbox(server: Nats, acme: Connection,
                                                                       subject: str) -> None:
    """Each subscription outside the product's own tenant and inbox (other tenants, the shared inbox, the JetStream
    API, all dead letters) is refused and logged as a violation."""
    await acme.nc.subscribe(subject)
    await acme.violation("subscription", subject)
    await server.logged_violation("acme", subject)


async def test_another_products_replies_and_traffic_never_reach_a_product(acme: Connection, globex: Connection,
                                                                          engram: Connection) -> None:
    """Besides the refusal on subscribe, nothing of globex's arrives at acme's attempted subscriptions."""
    leaked: list[str] = []

    async def record(msg: Msg) -> None:
        leaked.append(msg.subject)

    for subject in ("_INBOX_globex.>", "_INBOX.>", "mem.globex.>"):
        await acme.nc.subscribe(subject, cb=record)
    own: list[str] = []

    async def mine(msg: Msg) -> None:
        own.append(msg.subject)

    await acme.nc.subscribe("mem.acme.events.>", cb=mine)
    await _subscribed(acme.nc)
    await _responder(engram, "mem.globex.recall", [])
    assert (await globex.nc.request("mem.globex.recall", b"secret", timeout=5)).data == b"answer:secret"
    await engram.nc.publish("mem.globex.events.entry_created", b"{}")
    await engram.nc.publish("mem.acme.events.entry_created", b"{}")  # ordered after the globex event
    await eventually(lambda: own, timeout_s=5)  # acme's own event
    await acme.nc.flush()  # the server queued globex's reply to acme before this PONG, were acme subscribed
    assert leaked == []
    assert globex.errors == []


async def test_a_product_follows_its_events_and_dead_letters(acme: Connection, engram: Connection) -> None:
    """A product may subscribe to its own events and dead letters and receives both, with no violation."""
    got: list[str] = []

    async def record(msg: Msg) -> None:
        got.append(msg.subject)

    await acme.nc.subscribe("mem.acme.events.>", cb=record)
    await acme.nc.subscribe("mem.dlq.acme.>", cb=record)
    await _subscribed(acme.nc)
    await engram.nc.publish("mem.acme.events.entry_created", b"{}")
    await engram.nc.jetstream().publish("mem.dlq.acme.ingestor", b"{}", timeout=5)
    await eventually(lambda: got, lambda g: len(g) == 2, timeout_s=5)
    assert got == ["mem.acme.events.entry_created", "mem.dlq.acme.ingestor"]
    assert acme.errors == []


async def test_a_product_on_the_shared_inbox_prefix_gets_no_replies(server: Nats, engram: Connection) -> None:
    """Connecting without `_INBOX_<tenant>` is refused at the first request, not silently shared."""
    product = await _connect(server, "acme")  # inbox prefix _INBOX
    try:
        await _responder(engram, "mem.acme.entries", [])
        with pytest.raises(NatsTimeout):
            await product.nc.request("mem.acme.entries", b"q", timeout=1)
        await eventually(lambda: product.errors,
                         lambda errors: any("subscription" in e.lower() and '"_inbox.' in e.lower() for e in errors),
                         timeout_s=5)
    finally:
        await product.nc.close()


# --- the whole stack under engram's own user ------------------------------------------------------------------------

PETS = {"acme": ("Kiwi", "parrot"), "globex": ("Sheldon", "tortoise")}
QUESTION = "What is the pet called?"


def _product(nats_: Nats, tenant: str) -> NatsSecurity:
    return NatsSecurity(user=tenant, password=nats_.passwords[tenant], inbox_prefix=f"_INBOX_{tenant}")


async def _collect(conn: Connection, subject: str) -> list[Msg]:
    got: list[Msg] = []

    async def record(msg: Msg) -> None:
        got.append(msg)

    await conn.nc.subscribe(subject, cb=record)
    return got


async def test_engram_serves_every_tenant_and_keeps_them_apart(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """Under deploy/'s permissions, engram's own user ingests, recalls, consolidates, forgets and dead-letters for
    two tenants without a violation, and neither tenant sees the other's memories, events or replies."""
    caplog.set_level(logging.WARNING)
    own = _start(tmp_path / "nats")
    try:
        settings = Settings(data_dir=tmp_path / "data", http_port=0, sweep_interval_s=0.2, seal_grace_s=1.0,
                            idle_timeout_s=2.0, nats_user="engram", nats_password=SecretStr(own.passwords["engram"]))
        async with running(settings, nats_url=own.url) as state:
            await eventually(state.health.problem, lambda problem: problem is None)
            await _serve_both(own)
        engram_violations = own.violations("engram")
        assert engram_violations == [], "engram's own user lacks a permission:\n" + "\n".join(engram_violations)
        assert "Permissions Violation" not in caplog.text
    finally:
        own.server.stop()


def _received(subject: str) -> Callable[[list[Msg]], bool]:
    """Whether a message on `subject` is among the messages it is given."""
    return lambda messages: any(m.subject == subject for m in messages)


async def _recalled(client: MemoryClient, name: str) -> RecallResponse:
    """The recall answer, once an entry naming `name` is in it."""
    def names(reply: RecallResponse) -> bool:
        return any(name in e.text for e in reply.entries)

    return await eventually(lambda: client.recall(QUESTION, k=10), names, timeout_s=60)


async def _serve_both(own: Nats) -> None:
    raw = {tenant: await _connect(own, tenant, inbox_prefix=f"_INBOX_{tenant}") for tenant in PETS}
    events = {tenant: await _collect(conn, f"mem.{tenant}.events.>") for tenant, conn in raw.items()}
    dead = {tenant: await _collect(conn, f"mem.dlq.{tenant}.>") for tenant, conn in raw.items()}
    # Subscriptions the server refuses: were one let through, another tenant's traffic would show up in it.
    leaked: dict[str, list[list[Msg]]] = {tenant: [] for tenant in PETS}
    for tenant, conn in raw.items():
        for other in PETS.keys() - {tenant}:
            leaked[tenant] += [await _collect(conn, f"mem.{other}.>"), await _collect(conn, f"_INBOX_{other}.>")]
        leaked[tenant].append(await _collect(conn, "_INBOX.>"))
    for conn in raw.values():
        await _subscribed(conn.nc)
    clients = {tenant: await MemoryClient.connect(own.url, tenant, security=_product(own, tenant)) for tenant in PETS}
    conversation_id = unique("pets-")
    try:
        for tenant, (name, animal) in PETS.items():
            await clients[tenant].publish_turns(conversation(
                [("Ana", f"My {animal} is called {name} and loves mornings."), ("Bot", f"{name} sounds lovely.")],
                conversation_id=conversation_id))
            await clients[tenant].flush(conversation_id)
        for tenant, (name, _) in PETS.items():
            found = await _recalled(clients[tenant], name)
            others = [other_name for other, (other_name, _) in PETS.items() if other != tenant]
            for other in others:
                assert other not in found.context and all(other not in e.text for e in found.entries)
            listed = await clients[tenant].entries(op="list")
            assert listed.entries and all(other not in e.text for e in listed.entries for other in others)
        # The consolidator's lease and jobs, and forget's erasure (stream, KV, store), all run under engram's user.
        summary = await clients["acme"].consolidate()
        assert summary.error is None
        receipt = await clients["acme"].forget(conversation_id=conversation_id)
        assert receipt.verified
        assert all("Kiwi" not in e.text for e in (await clients["acme"].recall(QUESTION, k=10)).entries)
        assert any("Sheldon" in e.text for e in (await clients["globex"].recall(QUESTION, k=10)).entries)
        # A malformed turn is dead-lettered where only its tenant's product reads it.
        await raw["acme"].nc.jetstream().publish("mem.acme.turns", b"not json", timeout=5)
        await eventually(lambda: dead["acme"], timeout_s=30)  # acme's dead letter
        assert [m.subject for m in dead["acme"]] == ["mem.dlq.acme.ingestor"] and dead["globex"] == []
        for tenant, seen in events.items():
            await eventually(lambda seen=seen: seen, _received(f"mem.{tenant}.events.entry_created"), timeout_s=10)
            assert all(m.subject.startswith(f"mem.{tenant}.events.") for m in seen)
            await raw[tenant].nc.flush()  # anything routed to a refused subscription would have arrived before this
            assert all(got == [] for got in leaked[tenant]), f"{tenant} received another's traffic"
    finally:
        for client in clients.values():
            await client.close()
        for conn in raw.values():
            await conn.nc.close()
