"""Provisioning: a tenant's turns stream is made when its first turn or flush arrives, so that `make run` stays
zero-setup and a tenant added with `engram tenants` needs nothing more.

Every ingestor replica subscribes (core NATS, one queue group) to every tenant's turns and flush subjects beside the
streams. A message of a tenant whose stream exists was stored by that stream, which answered the publisher; the
provisioner ignores it. A message of a tenant with no stream yet reached only the provisioner: it makes the stream
(with the tenant's quota), announces it so every replica starts consuming it, stores the message there (its
de-duplication id kept, so a publisher's retry meanwhile is stored once) and forwards the stream's acknowledgement.
A subscription's messages come one after another, so a turn of that tenant that arrived while its stream was being
made waits behind the first: the stream did not see it, and the tenant is known by the time it is read. So when a
replica learns of a tenant's stream (it made it, or another replica announced it), each turn of that tenant among
the messages then waiting in its subscriptions (the first CATCH_UP of each, read within CATCH_UP_S) is stored
through the stream the same way: its id makes a turn the stream did see a duplicate, answered with the sequence it
has. A publisher's retry sent while the stream was being made is answered, not lost to a second timeout. A flush,
which has no id, is not sent twice.
With a tenants registry, a tenant it does not list is answered with a refusal instead. While the legacy stream of
every tenant exists (an engram from before), it captures every message and no provisioner runs.
"""
import functools
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from engram_client import subjects
from engram_client.contract.base import RESERVED_TENANT, TENANT_PATTERN
from shared.messaging import replies, streams
from shared.runtime import metrics

log = logging.getLogger("engram.provision")
QUEUE = "engram-provision"
_TENANT = re.compile(TENANT_PATTERN)
_NATS_HEADERS = ("Nats-Request-Info",)  # the server's own, added where the message crossed from another account
CATCH_UP = 1_000  # queued messages looked at for turns that came while a stream was being made (bounds a flood)
CATCH_UP_S = 30.0  # and for how long after (well inside the stream's de-duplication window of 120 s)

Ensure = Callable[[str], Awaitable[bool]]  # make or update a tenant's stream; True if it was made


def refusal(code: int, description: str) -> bytes:
    """A JetStream-style error reply, which NATS clients raise as an API error with this description."""
    return json.dumps({"error": {"code": code, "err_code": 10_000 + code, "description": description}}).encode()


@dataclass
class Queue:
    """One subscription's messages: how many it has begun to read, and for each tenant whose stream came to be while
    messages waited there, the last of those (by that count) and when."""

    read: int = 0
    until: dict[str, tuple[int, float]] = field(default_factory=dict)
    subscription: Subscription | None = None


class Provisioner:
    """Makes a tenant's turns stream on its first message (see the module doc)."""

    def __init__(self, nc: Client, prefix: str, ensure: Ensure, served: Callable[[str], bool]) -> None:
        self._nc = nc
        self._prefix = prefix
        self._ensure = ensure
        self._served = served
        self.known: set[str] = set()
        self._queues: list[Queue] = []  # the turns' and the flushes' subscriptions
        self._announced: Subscription | None = None

    async def start(self, known: set[str]) -> None:
        """Start watching for tenants with no stream; `known` are those that have one."""
        self.known |= known
        for pattern in streams.turns_subjects(self._prefix):
            queue = Queue()
            queue.subscription = await self._nc.subscribe(pattern, queue=QUEUE,
                                                          cb=functools.partial(self._on_message, queue))
            self._queues.append(queue)
        self._announced = await self._nc.subscribe(subjects.tenant_streams(self._prefix), cb=self._on_announced)

    async def stop(self) -> None:
        """Stop watching."""
        for subscription in [*(q.subscription for q in self._queues), self._announced]:
            if subscription is not None:
                await subscription.unsubscribe()
        self._queues.clear()
        self._announced = None

    async def _on_announced(self, msg: Msg) -> None:
        tenant = msg.data.decode(errors="replace")
        if _TENANT.match(tenant):
            self._learned(tenant)

    def _learned(self, tenant: str) -> None:
        """The tenant has a stream now: its turns waiting in the queues (the first CATCH_UP of each) may have come
        before it, unseen by it, and are stored through it when read (`_caught_up`). Learned once: what came after
        came after the stream."""
        if tenant in self.known:
            return
        self.known.add(tenant)
        now = time.monotonic()
        for queue in self._queues:
            waiting = min(queue.subscription.pending_msgs, CATCH_UP) if queue.subscription else 0
            if waiting and tenant not in queue.until:  # never stretched by a later stream's
                queue.until[tenant] = (queue.read + waiting, now)

    @staticmethod
    def _caught_up(queue: Queue, tenant: str, msg: Msg) -> bool:
        """Whether this message (the queue's latest read) is a turn that waited while its tenant's stream came to be,
        and so is stored through it: it carries its de-duplication id (a flush is not sent twice), and less than
        CATCH_UP_S went by since (well inside the stream's de-duplication window)."""
        if queue.until:
            now = time.monotonic()
            for gone in [t for t, (last, at) in queue.until.items() if last < queue.read or now - at > CATCH_UP_S]:
                del queue.until[gone]
        return tenant in queue.until and "Nats-Msg-Id" in (msg.headers or {})

    async def _on_message(self, queue: Queue, msg: Msg) -> None:
        queue.read += 1
        tenant, _ = subjects.parse(msg.subject)
        caught_up = self._caught_up(queue, tenant, msg)
        if tenant in self.known and not caught_up:
            return  # its stream stored the message and answered
        try:
            if caught_up:
                await self._store(msg)  # it waited while its stream came to be: the stream may not have it
            else:
                await self._provision(tenant, msg)
        except Exception as exc:  # never let a callback die: the publisher is told, the next message tries again
            log.exception("provisioning tenant %r failed", tenant[:64])
            await self._answer(msg, refusal(503, f"engram could not make tenant {tenant[:64]!r}'s turns stream "
                                                 f"({type(exc).__name__}); publish again"))

    async def _provision(self, tenant: str, msg: Msg) -> None:
        if not _TENANT.match(tenant) or tenant == RESERVED_TENANT:
            await self._answer(msg, refusal(400, f"{tenant[:64]!r} is not a tenant id ({TENANT_PATTERN})"))
            return
        if not self._served(tenant):
            metrics.tenants_refused_total.inc()
            await self._answer(msg, refusal(403, f"tenant {tenant!r} is not registered with engram"))
            return
        if await self._ensure(tenant):
            log.info("made the turns stream of tenant %s", tenant)
            metrics.tenant_streams_made_total.inc()
        self._learned(tenant)  # what waits behind this message came while the stream was being made (or just after)
        await self._nc.publish(subjects.tenant_streams(self._prefix), tenant.encode())
        await self._store(msg)

    async def _store(self, msg: Msg) -> None:
        """Store the message through its tenant's stream, with the publisher's headers (its de-duplication id among
        them), and answer the publisher with the stream's acknowledgement."""
        headers = {k: v for k, v in (msg.headers or {}).items() if k not in _NATS_HEADERS}
        ack = await self._nc.request(msg.subject, msg.data, timeout=10.0, headers=headers or None)
        await self._answer(msg, ack.data)

    async def _answer(self, msg: Msg, data: bytes) -> None:
        if msg.reply and replies.answerable(msg.reply):
            await self._nc.publish(msg.reply, data)
        elif msg.reply:
            replies.refused(msg.reply, "provision")
