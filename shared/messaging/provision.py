"""Provisioning: a tenant's turns stream is made when its first turn or flush arrives, so that `make run` stays
zero-setup and a tenant added with `engram tenants` needs nothing more.

Every ingestor replica subscribes (core NATS, one queue group) to every tenant's turns and flush subjects beside the
streams. A message of a tenant whose stream exists was stored by that stream, which answered the publisher; the
provisioner ignores it. A message of a tenant with no stream yet reached only the provisioner: it makes the stream
(with the tenant's quota), announces it so every replica starts consuming it, stores the message there (its
de-duplication id kept, so a publisher's retry meanwhile is stored once) and forwards the stream's acknowledgement.
A subscription's messages come one after another, so a turn of that tenant that arrived while its stream was being
made waits behind the first: the stream did not see it, and the tenant is known by the time it is read. Each turn
of a tenant made here among the messages then queued (the first CATCH_UP) is stored through the stream the same
way (its id makes a turn the stream did see a duplicate, answered with the sequence it has), so a publisher's retry
sent while the stream was being made is answered, not lost to a second timeout. A flush, which has no id, is not
sent twice.
With a tenants registry, a tenant it does not list is answered with a refusal instead. While the legacy stream of
every tenant exists (an engram from before), it captures every message and no provisioner runs.
"""
import functools
import json
import logging
import re
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

Ensure = Callable[[str], Awaitable[bool]]  # make or update a tenant's stream; True if it was made


def refusal(code: int, description: str) -> bytes:
    """A JetStream-style error reply, which NATS clients raise as an API error with this description."""
    return json.dumps({"error": {"code": code, "err_code": 10_000 + code, "description": description}}).encode()


@dataclass
class Behind:
    """The messages a subscription had queued when it made a tenant's stream, and the tenants it made meanwhile."""

    queued: int = 0
    tenants: set[str] = field(default_factory=set)


class Provisioner:
    """Makes a tenant's turns stream on its first message (see the module doc)."""

    def __init__(self, nc: Client, prefix: str, ensure: Ensure, served: Callable[[str], bool]) -> None:
        self._nc = nc
        self._prefix = prefix
        self._ensure = ensure
        self._served = served
        self.known: set[str] = set()
        self._subscriptions: list[Subscription] = []
        self._behind: list[Behind] = []

    async def start(self, known: set[str]) -> None:
        """Start watching for tenants with no stream; `known` are those that have one."""
        self.known |= known
        for pattern in streams.turns_subjects(self._prefix):
            index = len(self._subscriptions)
            self._behind.append(Behind())
            self._subscriptions.append(await self._nc.subscribe(
                pattern, queue=QUEUE, cb=functools.partial(self._on_message, index)))
        self._subscriptions.append(await self._nc.subscribe(subjects.tenant_streams(self._prefix),
                                                            cb=self._on_announced))

    async def stop(self) -> None:
        """Stop watching."""
        for subscription in self._subscriptions:
            await subscription.unsubscribe()
        self._subscriptions.clear()

    async def _on_announced(self, msg: Msg) -> None:
        tenant = msg.data.decode(errors="replace")
        if _TENANT.match(tenant):
            self.known.add(tenant)

    async def _on_message(self, index: int, msg: Msg) -> None:
        tenant, _ = subjects.parse(msg.subject)
        behind = self._behind[index]
        caught_up = behind.queued > 0 and tenant in behind.tenants and "Nats-Msg-Id" in (msg.headers or {})
        if behind.queued > 0:
            behind.queued -= 1
            if behind.queued == 0:
                behind.tenants.clear()
        if tenant in self.known and not caught_up:
            return  # its stream stored the message and answered
        try:
            if caught_up:
                await self._store(msg)  # arrived while its stream was being made: the stream may not have it
            else:
                await self._provision(tenant, msg, behind, self._subscriptions[index])
        except Exception as exc:  # never let a callback die: the publisher is told, the next message tries again
            log.exception("provisioning tenant %r failed", tenant[:64])
            await self._answer(msg, refusal(503, f"engram could not make tenant {tenant[:64]!r}'s turns stream "
                                                 f"({type(exc).__name__}); publish again"))

    async def _provision(self, tenant: str, msg: Msg, behind: Behind, subscription: Subscription) -> None:
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
        self.known.add(tenant)
        # What waits behind this message came while the stream was being made (or just after): its turns of this
        # tenant are stored through the stream too (_on_message).
        behind.queued = min(subscription.pending_msgs, CATCH_UP)
        behind.tenants.add(tenant)
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
