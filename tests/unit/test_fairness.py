"""The per-tenant queues of a retriever's workers: a tenant holds at most its share, its other requests wait in
order, workers that free go round robin to the tenants that wait, and only a full queue or a long wait is refused."""
import asyncio

import pytest
from prometheus_client import REGISTRY

from engram_client.errors import Unavailable
from shared.retrieval.fairness import FairQueue, admitted, tenant_limit


@pytest.mark.parametrize(("workers", "share", "limit"), [(16, 0.5, 8), (16, 1.0, 16), (16, 0.25, 4), (10, 0.3, 3),
                                                         (1, 0.5, 1), (3, 0.1, 1), (15, 0.5, 7)])
def test_the_limit_is_the_share_of_the_workers_and_at_least_one(workers: int, share: float, limit: int) -> None:
    """A tenant's share of the workers is rounded down, never below one request."""
    assert tenant_limit(workers, share) == limit


def test_the_subscriber_admits_the_workers_and_room_for_waiting_requests() -> None:
    """Waiting requests cost a coroutine, not a worker: the subscriber takes more messages than it has workers."""
    assert admitted(16, 64) == 16 + 4 * 64


def refused(kind: str) -> float:
    """engram_tenant_limited_total{kind} now."""
    return REGISTRY.get_sample_value("engram_tenant_limited_total", {"kind": kind}) or 0.0


class Requests:
    """Requests of tenants that hold their worker until released, recording the order they were let in."""

    def __init__(self, queue: FairQueue) -> None:
        self.queue = queue
        self.started: list[str] = []
        self._release: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def send(self, name: str) -> None:
        """One request named `name` ("tenant/number"), holding its worker until `release(name)`."""
        self._release[name] = asyncio.Event()

        async def run() -> None:
            async with self.queue.turn(name.split("/")[0]):
                self.started.append(name)
                await self._release[name].wait()

        self.tasks[name] = asyncio.create_task(run())

    async def release(self, name: str) -> None:
        """End request `name` and let the loop hand its worker on."""
        self._release[name].set()
        await self.tasks[name]
        await settle()


async def settle() -> None:
    """Let every ready task run."""
    for _ in range(5):
        await asyncio.sleep(0)


async def room(queue: FairQueue, tenant: str) -> tuple[int, int]:
    """How many requests of `tenant` are let in at once, and how many more may then wait, probed by sending them:
    (its limit, the queue's length) once nothing of the tenant is in progress or waiting. The probe's requests are
    gone when it returns."""
    probe = Requests(queue)
    for i in range(queue.limit + queue.queue + 1):
        probe.send(f"{tenant}/probe-{i}")
    await settle()
    let_in = list(probe.started)
    waiting = [t for name, t in probe.tasks.items() if name not in let_in and not t.done()]
    for task in waiting:
        task.cancel()
    await settle()
    for name in let_in:
        await probe.release(name)
    await asyncio.gather(*probe.tasks.values(), return_exceptions=True)  # the refused one raised OverShare
    return len(let_in), len(waiting)


async def test_a_tenant_over_its_share_waits_in_order_instead_of_being_refused() -> None:
    """Past its share a tenant's requests wait, and are let in first come, first served as its requests end."""
    requests = Requests(FairQueue("recall", workers=4, share=0.5, queue=10, max_wait_s=60))
    for i in range(5):
        requests.send(f"loud/{i}")
    await settle()
    assert requests.started == ["loud/0", "loud/1"]
    assert not any(task.done() for task in requests.tasks.values())  # the other three wait, none is refused
    await requests.release("loud/1")
    await requests.release("loud/0")
    assert requests.started == ["loud/0", "loud/1", "loud/2", "loud/3"]
    for name in ("loud/2", "loud/3"):
        await requests.release(name)
    await requests.release("loud/4")
    assert await room(requests.queue, "loud") == (2, 10)  # nothing of the tenant is held or waits any more


async def test_another_tenant_finds_a_worker_while_one_tenant_waits() -> None:
    """A flooding tenant waits for its share; another tenant's request is let in at once beside it."""
    requests = Requests(FairQueue("recall", workers=4, share=0.5, queue=10, max_wait_s=60))
    for i in range(6):
        requests.send(f"loud/{i}")
    await settle()
    requests.send("calm/0")
    await settle()
    assert requests.started == ["loud/0", "loud/1", "calm/0"]
    for name in ["calm/0", *(f"loud/{i}" for i in range(6))]:
        await requests.release(name)


async def test_freed_workers_go_round_robin_to_the_tenants_that_wait() -> None:
    """When every worker is busy, the next free one goes to the next tenant in line, not to the longest queue."""
    requests = Requests(FairQueue("recall", workers=2, share=1.0, queue=10, max_wait_s=60))
    for name in ("a/0", "a/1", "a/2", "a/3", "b/0", "c/0"):
        requests.send(name)
    await settle()
    assert requests.started == ["a/0", "a/1"]
    await requests.release("a/0")
    await requests.release("a/1")
    await requests.release("a/2")
    assert requests.started == ["a/0", "a/1", "a/2", "b/0", "c/0"]
    for name in ("b/0", "c/0", "a/3"):
        await requests.release(name)
    assert requests.started[-1] == "a/3"


async def test_a_full_queue_is_refused_at_once_with_a_retryable_error_naming_the_bounds() -> None:
    """Only when the tenant's queue is full is a request refused: `unavailable`, counted, naming both settings."""
    requests = Requests(FairQueue("entries", workers=2, share=0.5, queue=2, max_wait_s=60))
    for i in range(3):
        requests.send(f"loud/{i}")
    await settle()
    before = refused("entries")
    with pytest.raises(Unavailable) as refusal:
        async with requests.queue.turn("loud"):
            pytest.fail("a request past the full queue was let in")
    assert refused("entries") == before + 1
    assert refusal.value.retryable
    message = str(refusal.value)
    assert "'loud'" in message and "ENGRAM_RECALL_TENANT_QUEUE=2" in message and "retry" in message
    for i in range(3):
        await requests.release(f"loud/{i}")


async def test_a_request_that_waits_too_long_is_refused_and_leaves_the_queue() -> None:
    """A request still waiting after `max_wait_s` is answered `unavailable` and takes no worker afterwards."""
    queue = FairQueue("recall", workers=1, share=1.0, queue=5, max_wait_s=0.01)
    requests = Requests(queue)
    requests.send("t/0")
    await settle()
    with pytest.raises(Unavailable, match="waited"):
        async with queue.turn("t"):
            pytest.fail("let in while the only worker was held")
    await requests.release("t/0")
    queue.max_wait_s = 60  # the probe's own requests wait without a deadline
    assert await room(queue, "t") == (1, 5)  # the refused request holds no place in the queue, nor a worker


async def test_a_worker_is_given_back_when_a_request_ends_by_an_error_or_is_cancelled_while_waiting() -> None:
    """An error in the handler and a caller that goes away while waiting both leave the counts as they were."""
    queue = FairQueue("recall", workers=1, share=1.0, queue=5, max_wait_s=60)
    with pytest.raises(RuntimeError):
        async with queue.turn("t"):
            raise RuntimeError("the handler failed")
    assert await room(queue, "t") == (1, 5)
    requests = Requests(queue)
    requests.send("t/0")
    requests.send("t/1")
    await settle()
    requests.tasks["t/1"].cancel()
    await settle()
    await requests.release("t/0")
    assert requests.started == ["t/0"] and await room(queue, "t") == (1, 5)


async def test_only_tenants_with_requests_are_kept() -> None:
    """The tables hold tenants with a request in progress or waiting, so they never grow with the tenants seen."""
    queue = FairQueue("recall", workers=16, share=0.5, queue=4, max_wait_s=60)
    for i in range(1000):
        async with queue.turn(f"tenant-{i}"):
            pass
    assert queue._running == {} and queue._waiting == {}


async def test_without_a_queue_a_request_past_the_share_is_refused_and_leaves_nothing_behind() -> None:
    """Queue 0 is the old behaviour: refused at once past the share; the next request of the tenant is let in."""
    queue = FairQueue("recall", workers=2, share=0.5, queue=0, max_wait_s=60)
    async with queue.turn("t"):
        with pytest.raises(Unavailable, match="ENGRAM_RECALL_TENANT_QUEUE=0"):
            async with queue.turn("t"):
                pytest.fail("let in past the share")
    assert queue._waiting == {}
    assert await room(queue, "t") == (1, 0)  # the next request of the tenant is let in
