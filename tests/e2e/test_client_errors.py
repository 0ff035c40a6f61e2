"""Every error code of the contract, produced once through engram_client's MemoryClient against a running engram, as
the exception class that carries it: invalid_request, forbidden, not_found, unavailable (with the retry hint
honoured), timeout, internal; and a tenant's first turn that outlasts the client's timeout while engram makes its
stream, sent again and stored once.

Elsewhere too: `forbidden` in test_isolation, `unavailable` and `timeout` from a failing or stalled dependency in
test_chaos_dependencies, the retry hint under a real flood in test_fairness. Here a gate in front of the retriever's
recall (the real handler, its middleware and the real wire around it) holds or breaks recalls of one tenant, so each
code comes back the same way every run.
"""
import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import nats
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from engram_client import MemoryClient, subjects, wait_until_stored
from engram_client.contract import RecallRequest
from engram_client.errors import EngramError, Forbidden, InvalidRequest, NotFound, Timeout, Unavailable
from services.stack import Running
from shared.messaging import streams
from shared.messaging.provision import Provisioner
from shared.retrieval import serving
from tests.support.ids import unique
from tests.support.memory import store_all
from tests.support.polling import eventually
from tests.support.turns import conversation, make_turn

# The retriever of the module's stack: a tenant may hold 8 recalls at once, and 64 more may wait.
WORKERS, SHARE, QUEUE = 16, 0.5, 64


class Gate:
    """In front of the retriever's answer_recall: recalls of `held` tenants wait until `open`; of `broken` ones
    raise an error engram did not expect; every other recall goes straight through."""

    def __init__(self, answer: Callable[..., Awaitable[Any]]) -> None:
        self.answer = answer
        self.held: set[str] = set()
        self.broken: set[str] = set()
        self.waiting = 0
        self.opened = asyncio.Event()

    async def __call__(self, retrieval: Any, working_memory: Any, tenant: str, *args: Any) -> Any:
        if tenant in self.broken:
            raise RuntimeError("a bug engram did not foresee")
        if tenant in self.held:
            self.waiting += 1
            await self.opened.wait()
        return await self.answer(retrieval, working_memory, tenant, *args)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    """The gate, in place for one test (released at its end, so nothing is left waiting)."""
    switch = Gate(serving.answer_recall)
    monkeypatch.setattr(serving, "answer_recall", switch)
    yield switch
    switch.opened.set()


def refusals() -> float:
    """Recalls refused so far because their tenant had its share in flight (each one sent the retry hint)."""
    return REGISTRY.get_sample_value("engram_tenant_limited_total", {"kind": "recall"}) or 0.0


async def test_invalid_requests_and_bad_tenants_raise_invalid_request(stack: Running) -> None:
    """A tenant id the subject cannot carry, or the reserved one, is refused as InvalidRequest at connect, and a
    request the client would refuse is refused by engram for the same reason."""
    for bad in ("acme.recall", "*", "", "dlq", "a" * 65):  # a tenant the subject cannot carry, or the reserved one
        with pytest.raises(InvalidRequest, match="tenant id"):
            await MemoryClient.connect(stack.nats_url, bad)
    async with await MemoryClient.connect(stack.nats_url, unique("errors")) as client:
        # A request the client's own model would refuse, sent as is: engram refuses it with the same reason.
        unchecked = RecallRequest.model_construct(query="hello", k=0, mode="fast")
        with pytest.raises(InvalidRequest, match=r"invalid_request: .*k"):
            await client.recall(unchecked)


async def test_another_tenants_payload_is_forbidden_and_its_entries_are_not_found(stack: Running) -> None:
    """`forbidden` for a payload naming another tenant; `not_found` for the history of its entry; a forget of its
    entry ids finds and deletes nothing (the contract: engram never says whether another tenant holds an id)."""
    tenant, other = unique("errors"), unique("errors")
    async with await MemoryClient.connect(stack.nats_url, tenant) as client, \
            await MemoryClient.connect(stack.nats_url, other) as neighbour:
        with pytest.raises(Forbidden, match=repr(other)):
            await client.recall("anything", tenant_id=other)
        await store_all(neighbour, conversation([("Bo", "My bike is a red Bianchi.")], conversation_id="n1"))
        [theirs] = (await neighbour.entries(op="list", kind="episodic")).entries
        with pytest.raises(NotFound, match=theirs.id):
            await client.entries(op="history", ids=[theirs.id])
        receipt = await client.forget(entry_ids=[theirs.id])
        assert receipt.deleted.total == 0 and receipt.verified
        assert (await neighbour.entries(op="history", ids=[theirs.id])).entries[0].id == theirs.id


async def test_unavailable_after_honouring_the_retry_hint_then_answered(stack: Running, gate: Gate) -> None:
    """The tenant has its share of the retriever in flight and its queue full: engram refuses each further recall
    `unavailable` with the retry hint; the client asks again, backing off, until its timeout, then raises
    Unavailable. Once the share is free the same call is answered."""
    tenant = unique("errors")
    gate.held.add(tenant)
    async with await MemoryClient.connect(stack.nats_url, tenant, timeout_s=30) as holder, \
            await MemoryClient.connect(stack.nats_url, tenant, timeout_s=1.5) as client:
        share = int(WORKERS * SHARE)
        holding = [asyncio.create_task(holder.recall(f"question {i}")) for i in range(share)]
        await eventually(lambda: gate.waiting, lambda n: n >= share, timeout_s=20, interval_s=0.01)
        # The queue fills with more of the tenant's recalls; until it is full, a further one waits there too (and
        # its client gives up on it: Timeout), after that it is refused.
        waiting = [asyncio.create_task(holder.recall(f"waits {i}")) for i in range(QUEUE)]
        before = refusals()
        refused: Unavailable | None = None
        for _ in range(QUEUE):
            try:
                await client.recall("one more")
            except Unavailable as exc:
                refused = exc
                break
            except Timeout:
                continue
        assert refused is not None and "waiting" in str(refused)
        assert refused.retryable
        assert refusals() - before >= 2, "the client gave up at the first refusal instead of honouring the hint"
        gate.opened.set()
        assert all(reply.error is None for reply in await asyncio.gather(*holding))
        await asyncio.gather(*waiting, return_exceptions=True)
        assert (await client.recall("one more")).entries == []


async def test_timeout_and_internal(stack: Running, gate: Gate) -> None:
    """A recall engram does not answer within the client's timeout raises Timeout; one that hits an error engram
    did not expect answers `internal`, and the service keeps answering."""
    slow, broken = unique("errors"), unique("errors")
    gate.held.add(slow)
    gate.broken.add(broken)
    async with await MemoryClient.connect(stack.nats_url, slow, timeout_s=0.5) as client:
        with pytest.raises(Timeout, match=r"did not answer within 0\.5s") as late:
            await client.recall("anyone there?")
        assert late.value.retryable
    async with await MemoryClient.connect(stack.nats_url, broken) as client:
        with pytest.raises(EngramError, match=r"internal: internal error \(RuntimeError\)") as failed:
            await client.recall("anyone there?")
        assert failed.value.code == "internal" and not failed.value.retryable
        gate.broken.clear()
        assert (await client.recall("anyone there?")).entries == []


async def test_nobody_answering_is_unavailable(stack: Running) -> None:
    """A request on a prefix no service listens to raises Unavailable saying nobody answers."""
    async with await MemoryClient.connect(stack.nats_url, unique("errors"), prefix="nobody") as client:
        with pytest.raises(Unavailable, match="nobody answers nobody"):
            await client.recall("hello")


async def test_a_first_turn_that_outlasts_its_timeout_is_sent_again_and_stored_once(
        stack: Running, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A new tenant's first turn waits while engram makes the tenant's stream; on a loaded cluster that can outlast
    the client's timeout (seen in CI: 3 replicas, 2 cores). The client sends the turn again with the same
    de-duplication id: the stream holds it once, the client gets its sequence, and the window stores it once. The
    second try, which waited behind the first in the provisioner while the stream was being made, is answered."""
    tenant = unique("first")
    # The stream is made after the first try gave up and the second was sent: the second waits behind the first in
    # the provisioner, which then stores it through the stream it made (a duplicate there) and answers it.
    timeout_s, making_s = 2.0, 3.0  # the second try is sent at 2 s and times out at 4 s: a second of room each way
    provision = Provisioner._provision

    async def slow(self: Provisioner, of: str, *rest: Any) -> None:
        if of == tenant:
            await asyncio.sleep(making_s)
        await provision(self, of, *rest)

    monkeypatch.setattr(Provisioner, "_provision", slow)
    turn = make_turn("My first words to engram.", conversation_id="c-first", turn_id="t1", user_id="ana")
    async with await MemoryClient.connect(stack.nats_url, tenant, timeout_s=timeout_s) as client:
        with caplog.at_level(logging.INFO, logger="engram.client"):
            seq = await client.publish_turn(turn)
        assert "(try 1 of 3); sending it again" in caplog.text  # the first try did time out: not vacuous
        assert "(try 2 of 3)" not in caplog.text  # the second, queued while the stream was made, was answered
        deps = stack.ingestor_deps[0]
        info = await deps.js.stream_info(streams.turns_stream(deps.settings.subject_prefix, tenant))
        assert seq == 1 and info.state.last_seq == 1, "the turn was sent again and stored twice"
        await client.flush("c-first")
        await wait_until_stored(client, [turn], timeout_s=30)
        stored = (await client.entries(op="list", kind="episodic")).entries
        assert [e.source_turn_ids for e in stored] == [["t1"]]


async def test_a_turn_is_sent_again_only_while_the_stream_would_know_its_id(
        stack: Running, monkeypatch: pytest.MonkeyPatch, spans: InMemorySpanExporter) -> None:
    """Nobody acknowledges (a prefix engram does not serve, listened to by the test): a turn is sent again with the
    same de-duplication id, but never once the stream would have forgotten that id (a third try there could store
    it twice), and a flush, which has no id, is sent once; each raises Timeout saying how often it was tried, and
    each publish's span notes the tries sent again."""
    tenant, prefix = unique("lost"), unique("lost")
    seen: list[tuple[str, str | None]] = []
    nc = await nats.connect(stack.nats_url)

    async def listen(msg: Any) -> None:
        seen.append((msg.subject, (msg.headers or {}).get("Nats-Msg-Id")))

    await nc.subscribe(f"{prefix}.{tenant}.>", cb=listen)
    await nc.flush()
    turn = make_turn("hello", conversation_id="c1", turn_id="t1")
    try:
        async with await MemoryClient.connect(stack.nats_url, tenant, prefix=prefix, timeout_s=1.0) as client:
            with pytest.raises(Timeout, match=r"\(3 tries of 1 s\)"):  # PUBLISH_TRIES, well within the window
                await client.publish_turn(turn)
            # Two tries of 1 s fit in 3 s, a third never can (the second ends at 2 s at the earliest): a second of
            # room for a slow first try.
            monkeypatch.setattr(subjects, "TURNS_DUPLICATE_WINDOW_S", 3.0)
            with pytest.raises(Timeout, match=r"\(2 tries of 1 s\)"):
                await client.publish_turn(turn)
            with pytest.raises(Timeout, match=r"timed out$"):
                await client.flush("c1")
    finally:
        await nc.close()
    turns = (f"{prefix}.{tenant}.turns", f"{tenant}:c1:t1")
    assert seen == [turns] * 3 + [turns] * 2 + [(f"{prefix}.{tenant}.flush", None)]
    published = [s for s in spans.get_finished_spans() if s.name.endswith(" publish")]
    assert [[dict(e.attributes or {}) for e in s.events if e.name == "engram.retry"] for s in published] == [
        [{"engram.attempt": 1, "engram.reason": "timeout"}, {"engram.attempt": 2, "engram.reason": "timeout"}],
        [{"engram.attempt": 1, "engram.reason": "timeout"}], []]
