"""Sampling a running soak once a second: turns published and stored, consumer lag, engram's resident memory."""
import asyncio
import contextlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js.errors import NotFoundError

from bench.soak_load import Ledger
from bench.soak_stack import SoakStack, rss_mb
from engram_client import connection, subjects
from engram_client.errors import EngramError
from shared.messaging import streams
from shared.working_memory import WorkingMemory

PREFIX = "mem"
DURABLE = "ingestor"
PROBE_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Sample:
    """The state of the run at `t_s` (None: could not be read then, e.g. NATS or engram was down)."""

    t_s: float
    published: int          # turns acknowledged by JetStream so far
    stored: int             # distinct turns some created entry names as a source (from entry_created events)
    lag: int | None         # the ingestor consumer's num_pending + num_ack_pending
    behind: int             # published turns (not forgotten) no created entry names yet: in the stream or in
                            # working memory (an under-estimate of `stored` after an outage loses events)
    entries: int            # entries created minus entries forgotten (from events): the store's size
    rss_mb: float | None    # engram's VmRSS
    anon_mb: float | None   # of which its own heap (RssAnon); the rest is mapped files, mostly the store's
    recalls: int            # answered so far
    recall_errors: int


@dataclass
class Sampler:
    """Watches engram from outside: its events, its consumer, its process."""

    stack: SoakStack
    ledger: Ledger
    nc: Client | None = None
    samples: list[Sample] = field(default_factory=list)
    stored: set[tuple[str, str]] = field(default_factory=set)
    entry_sources: dict[tuple[str, str], list[str]] = field(default_factory=dict)   # (tenant, entry) -> turns
    faded_entries: set[tuple[str, str]] = field(default_factory=set)               # forgotten by retention
    forgotten_reasons: dict[str, int] = field(default_factory=dict)
    forgotten_entries: set[tuple[str, str]] = field(default_factory=set)

    async def open(self) -> None:
        """Connect (reconnecting for ever) and follow every tenant's events."""
        self.nc = await connection.connect(self.stack.nats_url, "engram-soak-sampler", quiet=True)
        await self.nc.subscribe(f"{PREFIX}.*.events.>", cb=self._on_event)

    async def close(self) -> None:
        """Disconnect."""
        if self.nc is not None:
            await self.nc.close()

    async def _on_event(self, msg: Msg) -> None:
        tenant = msg.subject.split(".")[1]
        event: dict[str, Any] = json.loads(msg.data)
        if msg.subject.endswith(".entry_created"):
            sources = [str(t) for t in event.get("source_turn_ids", [])]
            self.entry_sources[(tenant, event["entry_id"])] = sources
            self.stored.update((tenant, t) for t in sources)
        elif msg.subject.endswith(".entries_forgotten"):
            reason = str(event.get("reason"))
            self.forgotten_reasons[reason] = self.forgotten_reasons.get(reason, 0) + len(event.get("entry_ids", []))
            self.forgotten_entries.update((tenant, str(e)) for e in event.get("entry_ids", []))
            if reason != "forget request":  # retention: low_retention, ttl, cap (and rebuilt profiles)
                self.faded_entries.update((tenant, e) for e in event.get("entry_ids", []))

    def faded_turns(self) -> set[tuple[str, str]]:
        """Turns named by an entry that retention forgot (as far as the events seen tell)."""
        return {(tenant, t) for tenant, entry in self.faded_entries
                for t in self.entry_sources.get((tenant, entry), [])}

    async def lag(self) -> int | None:
        """Turns (and flushes) the ingestor has not yet acknowledged; None while NATS or the consumer is away."""
        assert self.nc is not None, "open() first"
        try:
            behind = 0
            for name in (await streams.tenant_streams(self.nc, PREFIX)).values():
                info = await self.nc.jetstream().consumer_info(name, DURABLE, timeout=PROBE_TIMEOUT_S)
                behind += (info.num_pending or 0) + (info.num_ack_pending or 0)
        except (NatsError, NotFoundError, TimeoutError, EngramError):
            return None
        return behind

    async def sample(self) -> Sample:
        """Take one sample now."""
        pid = self.stack.engram_pid
        behind = sum(1 for key, (user_id, conversation_id) in list(self.ledger.published.items())
                     if key not in self.stored and not self.ledger.forgotten(key[0], user_id, conversation_id))
        found = Sample(t_s=round(self.ledger.elapsed(), 2), published=len(self.ledger.published),
                       stored=len(self.stored), lag=await self.lag(), behind=behind,
                       entries=len(self.entry_sources.keys() - self.forgotten_entries),
                       rss_mb=rss_mb(pid) if pid else None, anon_mb=rss_mb(pid, "RssAnon") if pid else None,
                       recalls=len(self.ledger.recalls), recall_errors=sum(self.ledger.recall_errors.values()))
        self.samples.append(found)
        return found

    async def run(self, stop: asyncio.Event, interval_s: float = 1.0) -> None:
        """Sample every `interval_s` until `stop` is set."""
        while not stop.is_set():
            await self.sample()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)

    async def settled(self, tenants: list[str]) -> bool:
        """Nothing pending for the consumer and no turn waiting in any working-memory window."""
        assert self.nc is not None, "open() first"
        if await self.lag() != 0:
            return False
        try:
            wm = await WorkingMemory.open(self.nc.jetstream(), PREFIX)
            for tenant in tenants:
                for t, conversation in await wm.conversations(tenant):
                    buffer = await wm.get(t, conversation)
                    if buffer is not None and (buffer.open or buffer.sealed):
                        return False
        except (NatsError, TimeoutError):
            return False
        return True

    async def left_in_stream(self, ledger: Ledger) -> int:
        """Messages of forgotten users and conversations still in the turns stream (a forget must erase them)."""
        assert self.nc is not None, "open() first"
        js = self.nc.jetstream()

        def forgotten(tenant: str) -> Any:
            def match(data: bytes) -> bool:
                try:
                    message = json.loads(data)
                except ValueError:
                    return False
                return isinstance(message, dict) and ledger.forgotten(
                    tenant, str(message.get("user_id")), str(message.get("conversation_id")))
            return match

        tenants = sorted({t for t, _ in ledger.forgotten_users | ledger.forgotten_conversations})
        found = 0
        for tenant in tenants:
            stream = await streams.holding(js, PREFIX, tenant)
            for subject in (subjects.turns(PREFIX, tenant), subjects.flush(PREFIX, tenant)):
                if stream is not None:
                    found += len(await streams.matching(js, stream.name, subject, forgotten(tenant)))
        return found


def as_rows(samples: list[Sample]) -> list[dict[str, Any]]:
    """Samples as JSON-ready rows."""
    return [asdict(s) for s in samples]
