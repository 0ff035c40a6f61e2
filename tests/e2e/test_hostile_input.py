"""Hostile input against a running stack: every request is answered clearly, bad turns are dead-lettered with the
right reason, the stack stays ready, and no attacker ever reads or deletes another tenant's memory.

A victim tenant stores a few conversations holding secrets; an attacker tenant stores conversations under the same
user and conversation ids. The attacker then sends hypothesis-generated payloads (random and adversarial JSON,
near-valid payloads with one field wrong, deep nesting, payloads up to NATS's max_payload, invalid UTF-8, control
characters, the victim's ids and tenant in every field) to its own `recall`, `entries`, `forget` and
`consolidate` subjects and publishes them to `turns` and `flush`; then targeted scope-widening payloads; then
subject-injection tenant strings on raw subjects. Every reply is checked against the contract models themselves:
a payload the model refuses must be answered `invalid_request`, one naming another tenant `forbidden`, a valid one
with a valid reply. No reply may contain a victim secret or entry id the request did not already hold, and the
victim's entries must all still be there afterwards.

How hypothesis drives async code here: @given runs a synchronous function, while the stack lives on the module's
event loop. So each property first collects its inputs: `drawn(strategy, n)` runs a @given-decorated function n
times (settings max_examples=n, derandomize=True so every run sends the same inputs, no example database) that
appends each example to a list; the async test then sends them all and judges each reply. There is no shrinking:
a failure message names the exact payload instead.

Every hostile input sent is counted; `pytest -s` prints the module's one-line summary when it ends. "Crashes" are
answers the contract does not allow: none within the timeout, an unreadable reply, a code other than the models
say. Bugs found stay at the end of the module as regression tests, once fixed; the properties keep clear of the two
that used to stop the ingestor for every tenant (STREAM_MAX_BYTES, injected_tenants), which have tests of their own.
"""
import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import nats
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy
from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.errors import MaxPayloadError, NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import BadRequestError
from pydantic import BaseModel, ValidationError

from engram_client import MemoryClient
from engram_client.contract import (
    MAX_QUERY_CHARS,
    ConsolidateRequest,
    ConsolidationSummary,
    EntriesRequest,
    EntriesResponse,
    Flush,
    Forget,
    ForgetResult,
    RecallRequest,
    RecallResponse,
    Reply,
    Turn,
    validate_tenant,
)
from engram_client.errors import EngramError
from engram_client.sessions import wait_until_stored
from services.stack import Running, running
from shared.messaging import deadletter, nats_server
from shared.settings import Settings
from shared.tenancy.quotas import Quota
from tests.support.dead_letters import dead_letter_count, dead_letters
from tests.support.hostile import BASE, FIELDS, MAX_MESSAGE, MAX_PAYLOAD, entry_ids, hostile_payloads, ids, names, texts
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.stacks import fast_settings
from tests.support.turns import conversation

T = TypeVar("T")

REQUESTS: dict[str, type[BaseModel]] = {"recall": RecallRequest, "entries": EntriesRequest, "forget": Forget,
                                        "consolidate": ConsolidateRequest}
REPLIES: dict[str, type[Reply]] = {"recall": RecallResponse, "entries": EntriesResponse, "forget": ForgetResult,
                                   "consolidate": ConsolidationSummary}
STREAMED: dict[str, type[BaseModel]] = {"turns": Turn, "flush": Flush}
REQUEST_EXAMPLES = {"recall": 300, "entries": 300, "forget": 200, "consolidate": 200}
STREAM_EXAMPLES = {"turns": 150, "flush": 50}
REQUEST_TIMEOUT_S = 20.0
# A tenant's stream refuses a message past its size limit at the publish (a legal turn fits it; see
# test_a_body_near_max_payload_is_refused_or_dead_lettered_and_ingest_goes_on), so the bodies stay within it.
STREAM_MAX_BYTES = Quota().max_payload_bytes - 4_096
REQUEST_MAX_BYTES = MAX_PAYLOAD - 4_096   # the request's own subject and reply inbox fit beside it
TRANSIENT = ("unavailable", "timeout")    # clear answers a valid request may get under load


def drawn(strategy: SearchStrategy[T], n: int) -> list[T]:
    """n examples of `strategy`, the same on every run (hypothesis's @given collects them; see the module doc)."""
    found: list[T] = []

    @settings(BASE, max_examples=n, derandomize=True, phases=[Phase.generate])
    @given(strategy)
    def collect(value: T) -> None:
        found.append(value)

    collect()
    return found


# What happened to every hostile input ------------------------------------------------------------------------------

@dataclass
class Tally:
    """Counts of one test's hostile inputs and of every way they went wrong."""

    sent: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    crashes: list[str] = field(default_factory=list)   # no reply, an unreadable reply, a wrong code, stack not ready
    leaks: list[str] = field(default_factory=list)     # another tenant's data in a reply, or deleted

    def add(self, other: "Tally") -> None:
        """Fold another tally into this one."""
        self.sent += other.sent
        self.outcomes.update(other.outcomes)
        self.crashes += other.crashes
        self.leaks += other.leaks

    def check(self) -> None:
        """Fail with the first few problems, if any."""
        assert not self.crashes, f"{len(self.crashes)} crashes of {self.sent} inputs: {self.crashes[:5]}"
        assert not self.leaks, f"{len(self.leaks)} cross-tenant results of {self.sent} inputs: {self.leaks[:5]}"


TOTAL = Tally()


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    """The module's own stack, without request rates in the way: every hostile request must meet validation, not the
    tenant's rate (tests/security/test_quotas.py holds the rates)."""
    folder = tmp_path_factory.mktemp("stack")
    server = nats_server.start(folder / "nats")
    settings = fast_settings(folder).model_copy(update={"tenant_recall_per_s": 1e6, "tenant_recall_burst": 1_000_000,
                                                        "tenant_requests_per_s": 1e6,
                                                        "tenant_requests_burst": 1_000_000})
    try:
        async with running(settings, nats_url=server.url) as state:
            yield state
    finally:
        server.stop()


@pytest.fixture(scope="module", autouse=True)
def _summary() -> Iterator[None]:
    """Print the module's count of hostile inputs, crashes and cross-tenant results (`pytest -s` shows it)."""
    yield
    print(f"\nhostile inputs: {TOTAL.sent} sent, {len(TOTAL.crashes)} crashes, {len(TOTAL.leaks)} cross-tenant results")
    print(f"  outcomes: {dict(sorted(TOTAL.outcomes.items()))}")


def short(payload: bytes) -> str:
    """A payload as a failure message shows it."""
    return repr(payload[:160]) + (f"... ({len(payload)} bytes)" if len(payload) > 160 else "")


# The tenants ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class World:
    """The victim's stored memory and the attacker's tenant, with everything a leak check looks for."""

    victim: str
    attacker: str
    secrets: tuple[str, ...]
    users: tuple[str, ...]
    conversations: tuple[str, ...]
    speakers: tuple[str, ...]
    victim_ids: frozenset[str]

    @property
    def markers(self) -> list[bytes]:
        """What must never reach the attacker: the victim's secrets and entry ids."""
        return [m.encode() for m in (*self.secrets, *sorted(self.victim_ids))]


async def all_entries(client: MemoryClient) -> dict[str, str]:
    """Every entry of the client's tenant: id -> kind."""
    found: dict[str, str] = {}
    cursor = None
    while True:
        page = await client.entries(op="list", limit=500, cursor=cursor)
        found.update({e.id: e.kind for e in page.entries})
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


VICTIM_LINES = [
    [("Ana", "My locker code is {0}."), ("Bo", "Noted, I will keep it safe."), ("Ana", "My cat is called {1}."),
     ("Bo", "What a lovely name.")],
    [("Cy", "I moved to {2} street last week."), ("Bo", "Which number?"), ("Cy", "Number twelve, near the bakery."),
     ("Bo", "I know it well.")],
]
ATTACKER_LINES = [
    [("Ana", "My locker is by the door."), ("Bo", "Fine."), ("Ana", "My dog is called Rex."), ("Bo", "Nice.")],
    [("Cy", "I moved to the old town."), ("Bo", "Which street?"), ("Cy", "Near the river."), ("Bo", "Nice.")],
]


async def store_conversations(stack: Running, tenant: str, users: Sequence[str], conversations: Sequence[str],
                              lines: list[list[tuple[str, str]]]) -> None:
    """Store one conversation per (user, conversation id, lines) for the tenant, and wait until it is memory."""
    async with await MemoryClient.connect(stack.nats_url, tenant) as client:
        turns = [t for conv, user, convo in zip(conversations, users, lines, strict=True)
                 for t in conversation(convo, conversation_id=conv, user_id=user)]
        await client.publish_turns(turns)
        for conv in conversations:
            await client.flush(conv)
        await wait_until_stored(client, turns, timeout_s=60)


@pytest.fixture(scope="module")
async def world(stack: Running) -> World:
    """A victim with secrets in two conversations of two users; an attacker with the same user and conversation ids
    and speakers but other words."""
    victim, attacker = unique("victim"), unique("attacker")
    secrets = tuple(unique(word) for word in ("Quokkalantern", "Zyxbrimstone", "Vermiculite"))
    users = (unique("user"), unique("user"))
    conversations = (unique("conv"), unique("conv"))
    victim_lines = [[(speaker, text.format(*secrets)) for speaker, text in convo] for convo in VICTIM_LINES]
    await store_conversations(stack, victim, users, conversations, victim_lines)
    await store_conversations(stack, attacker, users, conversations, ATTACKER_LINES)
    async with await MemoryClient.connect(stack.nats_url, victim) as client:
        stored = await all_entries(client)
    return World(victim=victim, attacker=attacker, secrets=secrets, users=users, conversations=conversations,
                 speakers=("Ana", "Bo", "Cy"), victim_ids=frozenset(stored))


async def check_victim_intact(stack: Running, world: World) -> None:
    """The victim's entries are all still there (a scheduled consolidation may only add a profile), its recall
    still finds its secrets, and the stack is ready."""
    async with await MemoryClient.connect(stack.nats_url, world.victim) as client:
        now = await all_entries(client)
        assert world.victim_ids <= set(now), f"victim entries gone: {sorted(world.victim_ids - set(now))}"
        assert {kind for i, kind in now.items() if i not in world.victim_ids} <= {"profile"}
        for secret in world.secrets:
            found = await client.recall(secret, k=10)
            assert any(secret in e.text for e in found.entries), f"victim's recall lost {secret}"
    assert await stack.health.problem() is None


@pytest.fixture
async def attacker_nc(stack: Running) -> AsyncIterator[Client]:
    """A plain NATS connection: the attacker speaks raw bytes, not the SDK."""
    nc = await nats.connect(stack.nats_url)
    yield nc
    await nc.close()


# Judging one request-reply ------------------------------------------------------------------------------------------

def expected(kind: str, payload: bytes, tenant: str) -> tuple[str, BaseModel | None]:
    """What the contract says the answer is: the request model decides (`invalid_request`), then the tenant check
    (`forbidden`); else a reply."""
    model = (REQUESTS | STREAMED)[kind]
    try:
        request = model.model_validate_json(payload)
    except ValidationError:
        return "invalid_request", None
    named = getattr(request, "tenant_id", None)
    if named is not None and named != tenant:
        return "forbidden", request
    return "ok", request


def check_leaks(tally: Tally, world: World, what: str, payload: bytes, data: bytes) -> None:
    """A victim secret or entry id in a reply that the request did not already hold is a cross-tenant result."""
    for marker in world.markers:
        if marker in data and marker not in payload:
            tally.leaks.append(f"{what}: reply holds {marker.decode()!r}; request {short(payload)}")


async def ask(nc: Client, tally: Tally, world: World, kind: str, payload: bytes) -> Reply | None:
    """Send one hostile request to the attacker's subject and judge the reply against the contract."""
    tenant = world.attacker
    tally.sent += 1
    want, request = expected(kind, payload, tenant)
    what = f"{kind} {short(payload)}"
    try:
        msg = await nc.request(f"mem.{tenant}.{kind}", payload, timeout=REQUEST_TIMEOUT_S)
    except MaxPayloadError:
        tally.outcomes["refused by the client (max_payload)"] += 1
        return None
    except (NatsTimeout, NoRespondersError) as exc:
        tally.crashes.append(f"{what}: no reply ({type(exc).__name__})")
        return None
    check_leaks(tally, world, kind, payload, msg.data)
    try:
        reply = REPLIES[kind].model_validate_json(msg.data)
    except ValidationError as exc:
        tally.crashes.append(f"{what}: reply is not a {REPLIES[kind].__name__}: {msg.data[:200]!r} ({exc})")
        return None
    got = reply.error.code if reply.error else "ok"
    tally.outcomes[got] += 1
    if reply.error and not 0 < len(reply.error.message) <= MAX_MESSAGE:
        tally.crashes.append(f"{what}: error message of {len(reply.error.message)} characters")
    history = isinstance(request, EntriesRequest) and request.op == "history"  # of an id it may not hold
    if got != want and not (want == "ok" and (got in TRANSIENT or (history and got == "not_found"))):
        tally.crashes.append(f"{what}: answered {got!r}, the contract says {want!r}: "
                             f"{reply.error.message[:200] if reply.error else ''}")
    if isinstance(request, Forget) and isinstance(reply, ForgetResult) and request.entry_ids \
            and set(request.entry_ids) <= world.victim_ids and reply.deleted.total:
        tally.leaks.append(f"{what}: forgetting the victim's entry ids deleted {reply.deleted}")
    return reply


async def ask_all(nc: Client, tally: Tally, world: World, kind: str, payloads: Sequence[bytes],
                  concurrency: int) -> None:
    """Send every payload, `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(payload: bytes) -> None:
        async with gate:
            await ask(nc, tally, world, kind, payload)

    await asyncio.gather(*(one(p) for p in payloads))


def scope_fields(world: World, tenant: str) -> dict[str, SearchStrategy[Any]]:
    """Valid field values that often name the victim: its tenant, users, conversations, entry ids, speakers and
    secrets (users, conversations and speakers the attacker shares)."""
    victim_ids = st.sampled_from(sorted(world.victim_ids))
    persons = st.lists(st.one_of(names, st.sampled_from(world.speakers)), max_size=4)
    return {
        "tenant_id": st.sampled_from([tenant, tenant, world.victim, "someone-else"]),
        "user_id": st.one_of(ids, st.sampled_from(world.users)),
        "conversation_id": st.one_of(ids, st.sampled_from(world.conversations)),
        "query": st.one_of(texts(MAX_QUERY_CHARS), st.sampled_from(world.secrets)),
        "ids": st.lists(st.one_of(entry_ids, victim_ids), max_size=8),
        "entry_ids": st.lists(st.one_of(entry_ids, victim_ids), min_size=1, max_size=8),
        "cursor": st.one_of(entry_ids, victim_ids),
        "persons": persons,
        "filters": st.fixed_dictionaries({}, optional={"persons": persons, "topics": FIELDS["topics"],
                                                       "location": FIELDS["location"], "since": FIELDS["since"],
                                                       "until": FIELDS["until"]}),
    }


def victim_values(world: World) -> SearchStrategy[Any]:
    """The victim's names for anything, as hostile values for any field."""
    return st.sampled_from([world.victim, *world.secrets, *world.users, *world.conversations,
                            *sorted(world.victim_ids), [*sorted(world.victim_ids)], {"tenant_id": world.victim}])


# The properties ------------------------------------------------------------------------------------------------------

def widening(world: World) -> list[tuple[str, bytes]]:
    """Targeted attempts to reach the victim from the attacker's subjects."""
    v, a = world.victim, world.attacker
    every_id = sorted(world.victim_ids)
    attempts: list[tuple[str, dict[str, Any] | str]] = []
    for secret in world.secrets:
        attempts += [("recall", {"query": secret}),
                     ("recall", {"query": secret, "k": 100, "include_superseded": True, "explain": True,
                                 "mode": "deep"}),
                     ("recall", {"query": secret, "filters": {"persons": list(world.speakers)}})]
    attempts += [("recall", {"query": world.secrets[0], "filters": {"persons": ["*", ".*", "%", ">"],
                                                                    "location": "*"}}),
                 ("recall", {"query": world.secrets[2], "filters": {"since": "0001-01-01T00:00:00+14:00",
                                                                    "until": "9999-12-31T23:59:59-12:00"}})]
    for user in world.users:
        attempts += [("recall", {"query": world.secrets[0], "user_id": user}),
                     ("entries", {"op": "list", "user_id": user}),
                     ("consolidate", {"user_id": user})]
        # store keys are "<tenant>/<user>": a user id forging the victim's key stays under the attacker's prefix
        for forged in (f"{v}/{user}", f"../{v}/{user}", f"{user}/../../{v}"):
            attempts += [("recall", {"query": world.secrets[0], "user_id": forged}),
                         ("entries", {"op": "list", "user_id": forged}),
                         ("entries", {"op": "list", "conversation_id": f"{v}/{world.conversations[0]}"})]
    for conv in world.conversations:
        attempts += [("recall", {"query": world.secrets[1], "conversation_id": conv, "include_working_memory": True}),
                     ("recall", {"query": "code", "conversation_id": conv, "user_id": world.users[0],
                                 "include_working_memory": True}),
                     ("entries", {"op": "list", "conversation_id": conv, "limit": 500})]
    attempts += [("entries", {"op": "get", "ids": every_id}), ("entries", {"op": "list", "limit": 500}),
                 ("forget", {"entry_ids": every_id})]
    for entry_id in every_id:
        attempts += [("entries", {"op": "history", "ids": [entry_id]}),
                     ("entries", {"op": "list", "cursor": entry_id}),
                     ("entries", {"op": "get", "ids": [entry_id.upper()]}),
                     ("forget", {"entry_ids": [entry_id]})]
    bodies: dict[str, dict[str, Any]] = {"recall": {"query": world.secrets[0]},
                                         "entries": {"op": "get", "ids": every_id},
                                         "forget": {"entry_ids": every_id}, "consolidate": {}}
    for kind, body in bodies.items():  # the payload names the victim: forbidden, however it is spelled
        inner = json.dumps(body)[1:-1]
        sep = ", " if inner else ""
        attempts += [(kind, {**body, "tenant_id": v}),
                     (kind, f'{{"tenant_id": "{a}", "tenant_id": "{v}"{sep}{inner}}}'),
                     (kind, f'{{"tenant_id": "{v}", "tenant_id": "{a}"{sep}{inner}}}'),
                     (kind, "{" + '"tenant_id": "' + "".join(f"\\u{ord(c):04x}" for c in v) + f'"{sep}{inner}}}'),
                     *[(kind, {**body, "tenant_id": t}) for t in (f"{v}.recall", "*", ">", f"{v}\n", f" {v}",
                                                                 v.upper(), "", f"{v}\u0000")],
                     (kind, {**body, "Tenant_Id": v}), (kind, {**body, "tenant": v})]
    attempts += [("forget", {"user_id": u}) for u in world.users]  # the attacker's own data under shared ids
    attempts += [("forget", {"conversation_id": c}) for c in world.conversations]
    return [(kind, body.encode() if isinstance(body, str) else json.dumps(body).encode()) for kind, body in attempts]


async def test_scope_widening_attempts_never_reach_the_victim(stack: Running, world: World,
                                                              attacker_nc: Client) -> None:
    """The victim's user and conversation ids (which the attacker shares), its entry ids (fetched with the victim's
    own client), its tenant in the payload (forbidden, however spelled): the attacker only ever sees its own."""
    # An attacker of this test's own, with the same ids: the module's attacker may have forgotten its memory already
    # (the hostile forget payloads name the shared user and conversation ids), and the checks need real replies.
    attacker = unique("attacker")
    await store_conversations(stack, attacker, world.users, world.conversations, ATTACKER_LINES)
    world = replace(world, attacker=attacker)
    tally = Tally()
    answered_with_entries = 0
    for kind, payload in widening(world):
        reply = await ask(attacker_nc, tally, world, kind, payload)
        if isinstance(reply, EntriesResponse | RecallResponse) and reply.error is None:
            stray = {e.id for e in reply.entries} & world.victim_ids
            tally.leaks += [f"{kind} {short(payload)} returned the victim's entry {i}" for i in stray]
            answered_with_entries += bool(reply.entries)
    TOTAL.add(tally)
    tally.check()
    assert tally.outcomes["forbidden"] >= 4 * 4
    assert answered_with_entries >= 10, "the attacker's own memory answered (so the leak checks saw real replies)"
    await check_victim_intact(stack, world)


@pytest.mark.parametrize("kind", list(REQUESTS))
async def test_every_hostile_request_gets_a_clear_reply_and_nothing_of_another_tenant(
        stack: Running, world: World, attacker_nc: Client, kind: str) -> None:
    """Random, adversarial, nested, huge and scope-widening payloads on the attacker's request subjects."""
    payloads = drawn(hostile_payloads(REQUESTS[kind], max_bytes=REQUEST_MAX_BYTES,
                                      fields=scope_fields(world, world.attacker), extra=victim_values(world)),
                     REQUEST_EXAMPLES[kind])
    tally = Tally()
    # forget and consolidate take the tenant's lease: one at a time, so none waits behind another
    await ask_all(attacker_nc, tally, world, kind, payloads, concurrency=8 if kind in ("recall", "entries") else 1)
    TOTAL.add(tally)
    tally.check()
    assert tally.outcomes["ok"] > 0, "no valid request among the examples"
    await check_victim_intact(stack, world)


async def test_hostile_turns_and_flushes_are_dead_lettered_with_their_reason_or_stored(
        stack: Running, world: World) -> None:
    """Hostile bodies published to `turns` and `flush`: each one the models refuse is dead-lettered once with the
    right code and its body unchanged; each valid turn becomes memory; nothing reaches the victim."""
    tenant = unique("publisher")
    fields = scope_fields(world, tenant)
    batches = {kind: drawn(hostile_payloads(model, max_bytes=STREAM_MAX_BYTES, fields=fields,
                                            extra=victim_values(world)), STREAM_EXAMPLES[kind])
               for kind, model in STREAMED.items()}
    tally = Tally()
    letters_expected: dict[int, tuple[str, bytes]] = {}   # stream sequence -> (code, body)
    valid: dict[tuple[str, str], Turn] = {}               # the first of each (conversation, turn id) is stored
    nc = await nats.connect(stack.nats_url)
    js = nc.jetstream()
    try:
        for i in range(max(len(b) for b in batches.values())):
            for kind, batch in batches.items():
                if i >= len(batch):
                    continue
                payload = batch[i]
                tally.sent += 1
                ack = await js.publish(f"mem.{tenant}.{kind}", payload, timeout=REQUEST_TIMEOUT_S)
                want, request = expected(kind, payload, tenant)
                tally.outcomes[f"{kind}: {want}"] += 1
                if want != "ok":
                    letters_expected[ack.seq] = (want, payload)
                elif isinstance(request, Turn):
                    valid.setdefault((request.conversation_id, request.turn_id), request)
    finally:
        await nc.close()
    letters = await dead_letters(stack.nats_url, tenant, expect=len(letters_expected), timeout_s=60)
    for letter in letters:
        headers = letter.headers or {}
        seq = int(headers.get(deadletter.HEADER_SEQUENCE) or 0)
        code, body = letters_expected.get(seq, ("(not expected)", b""))
        if headers.get(deadletter.HEADER_CODE) != code or letter.data != body \
                or headers.get(deadletter.HEADER_SERVICE) != "ingestor":
            tally.crashes.append(f"dead letter of seq {seq}: {headers.get(deadletter.HEADER_CODE)} "
                                 f"({headers.get(deadletter.HEADER_REASON, '')[:120]}), expected {code}: "
                                 f"{short(letter.data)}")
        check_leaks(tally, world, "dead letter", letter.data, headers.get(deadletter.HEADER_REASON, "").encode())
    missing = set(letters_expected) - {int((m.headers or {}).get(deadletter.HEADER_SEQUENCE) or 0) for m in letters}
    tally.crashes += [f"seq {seq} ({letters_expected[seq][0]}) not dead-lettered: {short(letters_expected[seq][1])}"
                      for seq in sorted(missing)]
    async with await MemoryClient.connect(stack.nats_url, tenant) as client:
        for conversation_id in {c for c, _ in valid}:
            await client.flush(conversation_id)
        try:
            await wait_until_stored(client, list(valid.values()), timeout_s=60)
        except EngramError as exc:
            tally.crashes.append(f"valid hostile turns not stored: {exc}")
        for conversation_id in world.conversations:  # the publisher used the victim's conversation ids too
            page = await client.entries(op="list", conversation_id=conversation_id, limit=500)
            check_leaks(tally, world, "publisher's entries", b"", page.model_dump_json().encode())
    if await dead_letter_count(stack.nats_url, tenant) != len(letters_expected):
        tally.crashes.append(f"{await dead_letter_count(stack.nats_url, tenant)} dead letters, "
                             f"expected {len(letters_expected)} (did the closer dead-letter a valid turn?)")
    TOTAL.add(tally)
    tally.check()
    assert valid and letters_expected, "the examples hold both valid and invalid bodies"
    await check_victim_intact(stack, world)


def injected_tenants(victim: str) -> list[str]:
    """Tenant tokens that try to escape their place in `<prefix>.<tenant>.<kind>`.

    Long tokens are 3,000 or 5,000 characters: about 4,020-4,080 break the ingestor (see
    test_a_4060_character_tenant_on_turns_leaves_the_ingestor_connected).
    """
    return [f"{victim}.recall", f"{victim}.entries", f"{victim}.>", f"{victim}.*", "*", ">", f"*.{victim}",
            f"{victim}\r\n", f"{victim} ", f"{victim}\t", f"{victim}\x00", "dlq", f"dlq.{victim}", "", ".",
            f"{victim}.", f".{victim}", "a" * 65, "a" * 3_000, "a" * 5_000, victim.upper(), f"{victim}\u00e9"]


async def inject(url: str, subject: str, payload: bytes, stream: bool) -> tuple[str, bytes]:
    """Send one request (or JetStream publish) on a raw subject over a connection of its own, the client's subject
    checks off; returns (outcome, reply data). The server may close the connection: that is an outcome too."""
    closed = asyncio.Event()

    async def on_closed() -> None:
        closed.set()

    async def on_error(exc: Exception) -> None:
        pass

    nc = await nats.connect(url, skip_subject_validation=True, allow_reconnect=False, closed_cb=on_closed,
                            error_cb=on_error)
    try:
        if stream:
            sending: Awaitable[Any] = nc.jetstream().publish(subject, payload, timeout=5)
        else:
            sending = nc.request(subject, payload, timeout=5)
        task = asyncio.ensure_future(sending)
        gone = asyncio.ensure_future(closed.wait())
        await asyncio.wait([task, gone], return_when=asyncio.FIRST_COMPLETED)
        gone.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return "connection closed by the server", b""
        try:
            result = task.result()
        except (NatsError, NatsTimeout) as exc:
            return type(exc).__name__, b""
        return ("acked", b"") if stream else ("reply", result.data)
    finally:
        if not nc.is_closed:
            await nc.close()


async def test_subject_injection_tenants_reach_no_one(stack: Running, world: World) -> None:
    """Dots, wildcards, CRLF, whitespace, NUL, `dlq` and very long tenant tokens on every subject: answered
    `invalid_request`, unserved, or cut off by the server; never another tenant's data or a success for a token that
    is not exactly a valid tenant."""
    tally = Tally()
    bodies = {
        "recall": {"query": world.secrets[0]}, "entries": {"op": "get", "ids": sorted(world.victim_ids)},
        "forget": {"user_id": world.users[0]}, "consolidate": {},
        "turns": json.loads(conversation([("Ana", "My locker code is 0000.")], conversation_id=world.conversations[0],
                                         user_id=world.users[0])[0].model_dump_json()),
        "flush": {"conversation_id": world.conversations[0]},
    }
    for tenant in injected_tenants(world.victim):
        for kind, body in bodies.items():
            payload = json.dumps(body).encode()
            tally.sent += 1
            outcome, data = await inject(stack.nats_url, f"mem.{tenant}.{kind}", payload, kind in STREAMED)
            tally.outcomes[outcome] += 1
            check_leaks(tally, world, f"{kind} on tenant {tenant[:40]!r}", payload, data)
            if outcome == "TimeoutError":  # served (or it would be NoResponders) but never answered
                tally.crashes.append(f"{kind} on tenant {tenant[:40]!r}: no answer within 5 s")
            if outcome != "reply":
                continue
            stored = json.loads(data) if data.startswith(b'{"stream"') else None
            if stored is not None:  # a JetStream stream took the request as a message (`mem.dlq.…`: MEM_DLQ)
                tally.outcomes[outcome] -= 1
                tally.outcomes[f"kept by stream {stored['stream']}"] += 1
                continue
            reply = REPLIES[kind].model_validate_json(data)
            try:
                exact = validate_tenant(tenant) == tenant and tenant != world.victim
            except EngramError:
                exact = False
            if reply.error is None and not exact:
                tally.leaks.append(f"{kind} on tenant {tenant[:40]!r} was served: {data[:200]!r}")
            elif reply.error is not None and reply.error.code != "invalid_request" and not exact:
                tally.crashes.append(f"{kind} on tenant {tenant[:40]!r}: {reply.error.code}, not invalid_request")
    TOTAL.add(tally)
    tally.check()
    await eventually(lambda: stack.health.problem(), lambda problem: problem is None, timeout_s=10)
    await check_victim_intact(stack, world)


# A regression: caught by the stream property's bodies, fixed in 9db9cbb. ------------------------------------------

async def test_forget_still_works_after_a_deeply_nested_body(stack: Running) -> None:
    """A tenant that once published a deeply nested body can still forget its users (forget's scan of the stream
    and the dead letters raised RecursionError on it until 9db9cbb)."""
    async with await MemoryClient.connect(stack.nats_url, unique("nested")) as client:
        nc = await nats.connect(stack.nats_url)
        try:
            await nc.jetstream().publish(f"mem.{client.tenant}.turns", b"[" * 5_000 + b"]" * 5_000)
        finally:
            await nc.close()
        await dead_letters(stack.nats_url, client.tenant)
        reply = await client.raw_request("forget", b'{"user_id": "u1"}')
        assert reply.get("error") is None and reply["verified"], reply


# Bugs found, fixed, and kept as regressions. -------------------------------------------------------------------------

# FastStream used to json.loads every body before the handler and let RecursionError and ValueError through (answered
# `internal`); the subscribers now take the body undecoded (replies.raw_body).
@pytest.mark.parametrize("kind", list(REQUESTS))
@pytest.mark.parametrize("payload", [b"[" * 1_000 + b"]" * 1_000, b'{"k": ' + b"9" * 5_000 + b"}"],
                         ids=["nested", "huge-integer"])
async def test_a_body_json_loads_cannot_read_is_an_invalid_request(world: World, attacker_nc: Client, kind: str,
                                                                   payload: bytes) -> None:
    """What the request model refuses is answered `invalid_request`, whatever the JSON decoder thinks of it."""
    msg = await attacker_nc.request(f"mem.{world.attacker}.{kind}", payload, timeout=10)
    reply = REPLIES[kind].model_validate_json(msg.data)
    assert reply.error is not None and reply.error.code == "invalid_request", reply.error


# An entry id or cursor that was not a UUID used to reach uuid.UUID() in the store (answered `internal`); the contract
# now refuses it (EntryId).
@pytest.mark.parametrize(("kind", "body"), [
    ("entries", {"op": "get", "ids": ["not-a-uuid"]}), ("entries", {"op": "history", "ids": ["e1"]}),
    ("entries", {"op": "list", "cursor": "page-2"}), ("forget", {"entry_ids": ["not-a-uuid"]}),
], ids=["get", "history", "cursor", "forget"])
async def test_an_entry_id_that_is_not_a_uuid_is_not_an_internal_error(
        world: World, attacker_nc: Client, kind: str, body: dict[str, Any]) -> None:
    """An id the contract allows but no entry can have is answered like an id of nothing."""
    msg = await attacker_nc.request(f"mem.{world.attacker}.{kind}", json.dumps(body).encode(), timeout=10)
    reply = REPLIES[kind].model_validate_json(msg.data)
    assert reply.error is None or reply.error.code == "invalid_request", reply.error


async def ingest_goes_on(state: Running, tenant: str, dead_lettered: int = 1) -> None:
    """After a hostile publish: the stack stays ready, the message is dead-lettered (or was refused at the publish:
    `dead_lettered` 0), and another tenant's turns still become memory."""
    async def probe() -> tuple[str | None, int]:
        return await state.health.problem(), await dead_letter_count_any(state.nats_url)

    if dead_lettered:
        problem, letters = await eventually(probe, lambda r: r[0] is not None or r[1] > 0, timeout_s=20)
        assert letters == dead_lettered
    else:
        problem, letters = await probe()
        assert letters == 0
    assert problem is None, f"the stack is not ready any more: {problem}"
    async with await MemoryClient.connect(state.nats_url, tenant) as client:
        turns = conversation([("Ana", "I moved to Lisbon."), ("Bo", "Nice.")], conversation_id="after")
        await client.publish_turns(turns)
        await client.flush("after")
        await wait_until_stored(client, turns, timeout_s=20)


async def dead_letter_count_any(url: str) -> int:
    """How many dead letters the stream holds, of any tenant."""
    nc = await nats.connect(url)
    try:
        return int((await nc.jetstream().stream_info("MEM_DLQ")).state.messages)
    finally:
        await nc.close()


async def test_a_body_near_max_payload_is_refused_or_dead_lettered_and_ingest_goes_on(e2e_settings: Settings,
                                                                                       nats_url: str) -> None:
    """A body near NATS's max_payload is refused at the publish by the tenant's stream (`message size exceeds
    maximum allowed`); one just within the stream's limit is accepted and dead-lettered whole; ingest goes on (its
    own stack: a dead letter past max_payload once broke the ingestor)."""
    tenant = unique("big")
    async with running(e2e_settings, nats_url=nats_url) as state:
        nc = await nats.connect(state.nats_url)
        try:
            js = nc.jetstream()
            await js.publish(f"mem.{tenant}.flush", b'{"conversation_id": "c"}')  # its stream is made
            with pytest.raises(BadRequestError, match="message size exceeds maximum allowed"):
                await js.publish(f"mem.{tenant}.turns", b"x" * (nc.max_payload - 128))
            await js.publish(f"mem.{tenant}.turns", b"x" * (e2e_settings.tenant_max_payload_bytes - 4096))
        finally:
            await nc.close()
        await ingest_goes_on(state, unique("other"))


async def test_a_4060_character_tenant_on_turns_leaves_the_ingestor_connected(e2e_settings: Settings,
                                                                               nats_url: str) -> None:
    """A hostile subject names no tenant: no stream takes it and a JetStream publish of it is not acknowledged; the
    ingestor stays connected and ingest goes on (its own stack: the bug broke the ingestor)."""
    async with running(e2e_settings, nats_url=nats_url) as state:
        nc = await nats.connect(state.nats_url)
        try:
            await nc.publish(f"mem.{'a' * 4_060}.turns", b"{}")
            # A shorter token is refused by the provisioner (`is not a tenant id`, up to 3,000 characters measured);
            # one this long reaches no subscriber of engram's and is not answered (the ingestor stays connected).
            with pytest.raises((BadRequestError, NatsTimeout)):
                await nc.jetstream().publish(f"mem.{'a' * 4_060}.turns", b"{}", timeout=3)
        finally:
            await nc.close()
        await ingest_goes_on(state, unique("other"), dead_lettered=0)

