"""The soak's load: users publishing turns at a set rate, recalls, consolidations and forgets, all into a ledger."""
import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from bench.soak_chatter import Conversation, User, query
from engram_client import MemoryClient
from engram_client.contract import Turn
from engram_client.errors import EngramError

T = TypeVar("T")
RETRY_INTERVAL_S = 0.2
GIVE_UP_S = 180.0       # a publish or a request still failing after this is a failure of the run
RECALL_CONCURRENCY = 16


@dataclass
class Ledger:
    """Everything the soak did and saw, timed in seconds since the load started."""

    started: float = field(default_factory=time.monotonic)
    published: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # (tenant, turn) -> (user, conv)
    publish_retries: int = 0
    unpublished: list[tuple[str, str]] = field(default_factory=list)   # given up on: never acknowledged
    flushes: int = 0
    forgotten_users: set[tuple[str, str]] = field(default_factory=set)
    forgotten_conversations: set[tuple[str, str]] = field(default_factory=set)
    forgets: list[dict[str, Any]] = field(default_factory=list)
    recalls: list[tuple[float, float]] = field(default_factory=list)   # (t, ms) of answered recalls
    recall_errors: Counter[str] = field(default_factory=Counter)
    recall_error_times: list[float] = field(default_factory=list)
    consolidations: list[dict[str, Any]] = field(default_factory=list)
    chaos: list[dict[str, Any]] = field(default_factory=list)

    def elapsed(self) -> float:
        """Seconds since the load started."""
        return time.monotonic() - self.started

    def forgotten(self, tenant: str, user_id: str, conversation_id: str) -> bool:
        """Whether the soak asked engram to forget this user or this conversation."""
        return (tenant, user_id) in self.forgotten_users or (tenant, conversation_id) in self.forgotten_conversations


@dataclass(frozen=True)
class ForgetAction:
    """At `at_s`, the user forgets one of their conversations (or, with `whole_user`, everything of theirs)."""

    at_s: float
    whole_user: bool


async def until_done(call: Callable[[], Awaitable[T]], ledger: Ledger | None = None,
                     give_up_s: float = GIVE_UP_S) -> T | None:
    """What a product does while engram or NATS is away: try again until the call goes through (None: gave up)."""
    deadline = time.monotonic() + give_up_s
    while True:
        try:
            return await call()
        except EngramError:
            if time.monotonic() > deadline:
                return None
            if ledger is not None:
                ledger.publish_retries += 1
            await asyncio.sleep(RETRY_INTERVAL_S)


@dataclass
class Clients:
    """One tenant's clients: `publisher` with a short timeout (so publishes retry quickly during an outage),
    `asker` with a long one for recall, consolidate and forget."""

    publisher: MemoryClient
    asker: MemoryClient

    async def close(self) -> None:
        """Close both connections."""
        await self.publisher.close()
        await self.asker.close()


async def connect(url: str, tenant: str) -> Clients:
    """Both clients of a tenant."""
    return Clients(publisher=await MemoryClient.connect(url, tenant, timeout_s=2.0),
                   asker=await MemoryClient.connect(url, tenant, timeout_s=30.0))


async def _publish(client: MemoryClient, turn: Turn, user: User, ledger: Ledger) -> None:
    if await until_done(lambda: client.publish_turn(turn), ledger) is None:
        ledger.unpublished.append((user.tenant, turn.turn_id))
    else:
        ledger.published[(user.tenant, turn.turn_id)] = (user.user_id, turn.conversation_id)


async def _flush(client: MemoryClient, conversation: Conversation, ledger: Ledger) -> None:
    if await until_done(lambda: client.flush(conversation.conversation_id), ledger) is not None:
        ledger.flushes += 1


async def _forget(clients: Clients, user: User, ledger: Ledger, conversation: Conversation | None) -> None:
    """Forget the conversation (or the whole user, when None) and note the receipt. Nothing of it is published
    after this starts, so every turn of it the ledger holds must be gone from every entry."""
    tenant, at = user.tenant, ledger.elapsed()
    user_id = user.user_id if conversation is None else None
    conversation_id = conversation.conversation_id if conversation is not None else None
    if user_id is not None:
        ledger.forgotten_users.add((tenant, user_id))
    if conversation_id is not None:
        ledger.forgotten_conversations.add((tenant, conversation_id))
    what = {"user_id": user_id} if user_id is not None else {"conversation_id": conversation_id}
    started, sent_at = time.perf_counter(), datetime.now(UTC).isoformat()
    attempts: list[str] = []  # how each failed attempt ended, and when (a retry finds what a lost reply did)
    result = None
    while result is None and time.perf_counter() - started < GIVE_UP_S:
        try:
            result = await clients.asker.forget(user_id=user_id, conversation_id=conversation_id)
        except EngramError as exc:
            attempts.append(f"{exc.code} at {ledger.elapsed():.1f}s")
            await asyncio.sleep(RETRY_INTERVAL_S)
    ledger.forgets.append({"t_s": round(at, 1), "sent_at": sent_at, "tenant": tenant, **what,
                           "answered": result is not None, "failed_attempts": len(attempts),
                           "failures": sorted(set(a.split(" at ")[0] for a in attempts)),
                           "last_failure": attempts[-1] if attempts else None,
                           "verified": bool(result and result.verified), "ms": (time.perf_counter() - started) * 1e3,
                           "deleted": result.deleted.model_dump() if result else None})


async def converse(user: User, clients: Clients, ledger: Ledger, interval_s: float, plan: list[ForgetAction],
                   stop: asyncio.Event) -> None:
    """Publish the user's turns, one every `interval_s` on average (Poisson), catching up after an outage; flush
    each conversation when it ends; carry out the user's forget actions; flush what is open when `stop` is set."""
    loop = asyncio.get_running_loop()
    next_at = loop.time() + user.rng.uniform(0, interval_s)
    while not stop.is_set():
        delay = next_at - loop.time()
        if delay > 0:
            try:
                await asyncio.wait_for(stop.wait(), delay)
                break
            except TimeoutError:
                pass
        if plan and plan[0].at_s <= ledger.elapsed():
            action = plan.pop(0)
            if action.whole_user:
                await _forget(clients, user, ledger, None)
                return
            gone = user.rng.choice(user.conversations)
            await _forget(clients, user, ledger, gone)
            user.replace(gone, forgotten=True)
        conversation = user.rng.choice(user.conversations)
        await _publish(clients.publisher, conversation.next_turn(user.rng), user, ledger)
        if conversation.done:
            await _flush(clients.publisher, conversation, ledger)
            user.replace(conversation)
        next_at += user.rng.expovariate(1 / interval_s)
    for conversation in user.conversations:  # the session ends: close what is open
        if conversation.sent:
            await _flush(clients.publisher, conversation, ledger)


async def recall_load(clients: dict[str, Clients], users: list[User], rate: float, ledger: Ledger,
                      stop: asyncio.Event, rng: random.Random) -> None:
    """Recalls at `rate` per second (Poisson) for users not forgotten, at most RECALL_CONCURRENCY at once."""
    if rate <= 0:
        return
    slots = asyncio.Semaphore(RECALL_CONCURRENCY)
    running: set[asyncio.Task[None]] = set()

    async def one(user: User) -> None:
        async with slots:
            at, started = ledger.elapsed(), time.perf_counter()
            try:
                await clients[user.tenant].asker.recall(query(rng), user_id=user.user_id, k=10)
            except EngramError as exc:
                ledger.recall_errors[exc.code] += 1
                ledger.recall_error_times.append(at)
                return
            ledger.recalls.append((at, (time.perf_counter() - started) * 1e3))

    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), rng.expovariate(rate))
            break
        except TimeoutError:
            pass
        present = [u for u in users if (u.tenant, u.user_id) not in ledger.forgotten_users]
        if present:
            task = asyncio.create_task(one(rng.choice(present)))
            running.add(task)
            task.add_done_callback(running.discard)
    await asyncio.gather(*running)


async def consolidate_load(clients: dict[str, Clients], every_s: float, ledger: Ledger, stop: asyncio.Event) -> None:
    """A `consolidate` request every `every_s`, one tenant after another."""
    if every_s <= 0:
        return
    turn = 0
    tenants = sorted(clients)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), every_s)
            break
        except TimeoutError:
            pass
        tenant = tenants[turn % len(tenants)]
        turn += 1
        at, started = ledger.elapsed(), time.perf_counter()
        record: dict[str, Any] = {"t_s": round(at, 1), "tenant": tenant}
        try:
            summary = await clients[tenant].asker.consolidate(timeout_s=120)
            record.update(summary.model_dump(include={"owners", "scored", "merged", "superseded", "forgotten",
                                                      "profiles_updated"}))
        except EngramError as exc:
            record["error"] = exc.code
        record["ms"] = (time.perf_counter() - started) * 1e3
        ledger.consolidations.append(record)


def forget_plan(users: list[User], forget_users: int, forget_conversations: int, duration_s: float,
                rng: random.Random) -> dict[tuple[str, str], list[ForgetAction]]:
    """Which users forget what, and when: in the middle of the run (30%-70% of it), each user at most once."""
    chosen = rng.sample(users, min(len(users), forget_users + forget_conversations))
    plan: dict[tuple[str, str], list[ForgetAction]] = {}
    for i, user in enumerate(chosen):
        at = rng.uniform(0.3, 0.7) * duration_s
        plan[(user.tenant, user.user_id)] = [ForgetAction(at_s=at, whole_user=i < forget_users)]
    return plan
