"""Batching sealed windows without a broker: round robin by tenant, newcomers in the next batch, backoff per window,
and a failed batch tried window by window when that finds the one that fails."""
from datetime import UTC, datetime, timedelta

from shared.ingest.batching import MAX_BATCH_WINDOWS, Backlog, Due, Retries, interleaved, isolate, window_key, writable
from shared.messaging.deadletter import retry_delay_s
from shared.working_memory.buffer import Buffer, SealedWindow

NOW = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def window(*seqs: int, age_s: float = 60.0) -> SealedWindow:
    """A window of these turns sealed `age_s` before NOW."""
    return SealedWindow(seqs=list(seqs), sealed_at=NOW - timedelta(seconds=age_s), reason="flush")


def due(tenant: str, n: int) -> Due:
    """Window n of a conversation of its own of `tenant`."""
    return tenant, f"{tenant}{n}", window(n)


def test_windows_are_interleaved_by_tenant_each_in_its_own_order() -> None:
    """One window of each tenant in turn; a tenant's windows keep their order, tenants in order of appearance."""
    flood = [due("a", n) for n in range(4)]
    got = interleaved([*flood, due("b", 0), due("c", 0), due("b", 1)])
    assert [(t, c) for t, c, _ in got] == [("a", "a0"), ("b", "b0"), ("c", "c0"), ("a", "a1"), ("b", "b1"),
                                           ("a", "a2"), ("a", "a3")]
    assert interleaved([]) == []


def test_a_tenant_with_nothing_waiting_joins_the_next_batch_and_one_in_the_backlog_waits_its_turn() -> None:
    """While a flood's backlog is written, a newly sealed window of a calm tenant is in the very next batch; a
    flooding tenant's new window is not let ahead of its own backlog."""
    backlog = Backlog([due("flood", n) for n in range(40)])
    assert [t for t, _, _ in backlog.take()] == ["flood"] * MAX_BATCH_WINDOWS
    assert backlog.newcomers([("calm", "c0"), ("flood", "f99")]) == [("calm", "c0")]
    backlog.join([due("calm", 0)])
    batch = backlog.take()
    assert ("calm", "calm0") in [(t, c) for t, c, _ in batch] and len(batch) == MAX_BATCH_WINDOWS
    rest = [backlog.take() for _ in range(3)]
    assert sum(len(b) for b in rest) == 40 - 2 * MAX_BATCH_WINDOWS + 1 and not backlog


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
