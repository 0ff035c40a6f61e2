"""Batching sealed windows without a broker: a queue per tenant, windows queued or in flight never queued twice,
backoff per window, and a failed batch tried window by window when that finds the one that fails."""
from datetime import UTC, datetime, timedelta

from shared.ingest.batching import MAX_BATCH_WINDOWS, Due, Retries, TenantQueues, isolate, window_key, writable
from shared.messaging.deadletter import retry_delay_s
from shared.working_memory.buffer import Buffer, SealedWindow

NOW = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def window(*seqs: int, age_s: float = 60.0) -> SealedWindow:
    """A window of these turns sealed `age_s` before NOW."""
    return SealedWindow(seqs=list(seqs), sealed_at=NOW - timedelta(seconds=age_s), reason="flush")


def due(tenant: str, n: int) -> Due:
    """Window n of a conversation of its own of `tenant`."""
    return tenant, f"{tenant}{n}", window(n)


def test_each_tenant_has_a_queue_of_its_own_in_its_own_order() -> None:
    """Windows wait in their tenant's queue, in the order they came; tenants in the order they first came."""
    queues = TenantQueues()
    queues.add([*(due("a", n) for n in range(4)), due("b", 0), due("c", 0), due("b", 1)])
    assert queues.waiting() == ["a", "b", "c"]
    assert [c for _, c, _ in queues.take("a", size=3)] == ["a0", "a1", "a2"]
    assert [c for _, c, _ in queues.take("b")] == ["b0", "b1"]
    assert queues.waiting() == ["a", "c"] and queues


def test_a_calm_tenants_window_waits_for_no_batch_of_a_flood() -> None:
    """While a flood's first batch is being written, a calm tenant's new window is ready at once in its own queue;
    a window queued or being written is not queued again until its batch is done."""
    queues = TenantQueues()
    queues.add([due("flood", n) for n in range(40)])
    first = queues.take("flood")
    assert len(first) == MAX_BATCH_WINDOWS
    queues.add([due("calm", 0), *first])  # the flood's conversations read again: their windows are still sealed
    assert queues.waiting() == ["flood", "calm"] and len(queues.queues["flood"]) == 40 - MAX_BATCH_WINDOWS
    assert queues.take("calm") == [due("calm", 0)]
    queues.done(first)
    queues.add(first[:1])  # a window of a failed batch may come back once it backed off
    assert queues.queues["flood"][-1] == first[0]


def test_a_window_backs_off_after_a_failure_with_the_dead_letter_delays() -> None:
    """A failed window is not writable until its backoff ends; the delays are the settle decision's."""
    buffer = Buffer(tenant_id="t", conversation_id="c1", sealed=[window(1, 2), window(3, 4)])
    retries = Retries()
    assert retries.failed(("t", "c1", (1, 2)), now_s=100.0) == 1
    assert [w.seqs for _, _, w in writable("t", "c1", buffer, retries, now=NOW, now_s=100.0, min_age_s=0)] == [[3, 4]]
    later = 100.0 + retry_delay_s(1)
    assert len(writable("t", "c1", buffer, retries, now=NOW, now_s=later, min_age_s=0)) == 2
    assert retries.failed(("t", "c1", (1, 2)), now_s=later) == 2
    assert retries.waiting(("t", "c1", (1, 2)), later + retry_delay_s(2) - 0.1)
    retries.done(("t", "c1", (1, 2)))
    assert retries.attempts(("t", "c1", (1, 2))) == 0 and retries.windows() == []


def test_backoff_is_forgotten_for_windows_another_replica_finished() -> None:
    """A window written elsewhere (no longer sealed) loses its attempts here; the conversation's own still backs
    off."""
    buffer = Buffer(tenant_id="t", conversation_id="c1", sealed=[window(1)])
    retries = Retries()
    retries.failed(("t", "c1", (1,)), now_s=0.0)
    retries.failed(("t", "c1", (99,)), now_s=0.0)  # written by another replica since
    retries.failed(("t", "other", (99,)), now_s=0.0)  # another conversation's: not this one's business
    assert writable("t", "c1", buffer, retries, now=NOW, now_s=0.0, min_age_s=0) == []
    assert sorted(retries.windows()) == [("t", "c1", (1,)), ("t", "other", (99,))]


def test_only_windows_past_their_minimum_age_are_writable() -> None:
    """Another replica's windows wait out the grace period; this replica's are written at once."""
    buffer = Buffer(tenant_id="t", conversation_id="c1", sealed=[window(1, age_s=5), window(2, age_s=60)])
    assert [w.seqs for _, _, w in writable("t", "c1", buffer, Retries(), now=NOW, now_s=0, min_age_s=30)] == [[2]]
    assert len(writable("t", "c1", buffer, Retries(), now=NOW, now_s=0, min_age_s=0)) == 2


def test_a_failed_batch_is_split_to_find_the_window_that_fails() -> None:
    """At once for a failure retrying cannot fix; for a retryable one once the same windows failed twice; never
    for a single window."""
    batch = [due("a", 1), due("b", 2)]
    retries = Retries()
    assert isolate(batch, retryable=False, retries=retries)
    assert not isolate(batch, retryable=True, retries=retries)
    for _ in range(2):
        for one in batch:
            retries.failed(window_key(one), now_s=0)
    assert isolate(batch, retryable=True, retries=retries)
    assert not isolate(batch[:1], retryable=False, retries=retries)
