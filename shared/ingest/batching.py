"""Batching sealed windows for the writer, as pure bookkeeping: which windows may be written now, and in what order.

Tenants share the writer fairly: each tenant's windows wait in a queue of their own, and the closer writes a batch of
each waiting tenant side by side (the passage embedder takes a text of each batch in turn), so one tenant's flood of
windows delays its own windows, not another tenant's.
"""
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from shared.messaging.deadletter import retry_delay_s
from shared.working_memory.buffer import Buffer, SealedWindow

MAX_BATCH_WINDOWS = 16   # windows compressed and embedded together
Conversation = tuple[str, str]                # (tenant, conversation id)
Due = tuple[str, str, SealedWindow]           # a window to write
WindowKey = tuple[str, str, tuple[int, ...]]  # (tenant, conversation id, its turns' sequences)


def window_key(due: Due) -> WindowKey:
    """The key a window's failed attempts are kept under."""
    tenant, conversation_id, window = due
    return tenant, conversation_id, tuple(window.seqs)


@dataclass
class TenantQueues:
    """The windows waiting to be written, a queue per tenant (each in its own order), and those being written.

    The closer writes a batch of each waiting tenant side by side (up to a bound), so a tenant's flood of windows
    delays its own windows, and another tenant's window waits for no batch of the flood's. A window queued or being
    written is not queued again (it stays sealed in its buffer until its batch completes).
    """

    queues: dict[str, list[Due]] = field(default_factory=dict)
    _known: set[WindowKey] = field(default_factory=set)

    def __bool__(self) -> bool:
        return any(self.queues.values())

    def add(self, todo: Iterable[Due]) -> None:
        """Queue these windows behind their tenant's, leaving out those queued or being written already."""
        for due in todo:
            key = window_key(due)
            if key not in self._known:
                self._known.add(key)
                self.queues.setdefault(due[0], []).append(due)

    def waiting(self) -> list[str]:
        """The tenants with windows waiting, in the order they first came."""
        return [tenant for tenant, queue in self.queues.items() if queue]

    def take(self, tenant: str, size: int = MAX_BATCH_WINDOWS) -> list[Due]:
        """The tenant's next batch, at most `size` windows (they count as being written until `done`)."""
        queue = self.queues.get(tenant, [])
        batch, self.queues[tenant] = queue[:size], queue[size:]
        return batch

    def done(self, batch: Iterable[Due]) -> None:
        """These windows were written or failed: they may be queued again (a failed one, once it backs off)."""
        self._known.difference_update(window_key(due) for due in batch)


@dataclass
class _Attempts:
    failed: int = 0
    next_at_s: float = 0.0


@dataclass
class Retries:
    """Failed attempts at writing each window, and when it may be tried again (times from a monotonic clock)."""

    _windows: dict[WindowKey, _Attempts] = field(default_factory=dict)

    def attempts(self, key: WindowKey) -> int:
        """How often writing this window failed since it last succeeded."""
        return self._windows[key].failed if key in self._windows else 0

    def failed(self, key: WindowKey, now_s: float) -> int:
        """Count a failed attempt and back off (the dead-letter settle's delays); returns the attempts so far."""
        state = self._windows.setdefault(key, _Attempts())
        state.failed += 1
        state.next_at_s = now_s + retry_delay_s(state.failed)
        return state.failed

    def done(self, key: WindowKey) -> None:
        """The window was written (or given up): no more backing off."""
        self._windows.pop(key, None)

    def waiting(self, key: WindowKey, now_s: float) -> bool:
        """True while the window backs off."""
        return key in self._windows and self._windows[key].next_at_s > now_s

    def keep(self, tenant: str, conversation_id: str, sealed: Iterable[tuple[int, ...]]) -> None:
        """Forget the windows of this conversation that are no longer sealed (another replica wrote them)."""
        still = set(sealed)
        for gone in [k for k in self._windows if k[:2] == (tenant, conversation_id) and k[2] not in still]:
            del self._windows[gone]

    def windows(self) -> list[WindowKey]:
        """The windows backing off or with failed attempts."""
        return list(self._windows)


def writable(tenant: str, conversation_id: str, buffer: Buffer, retries: Retries, *, now: datetime, now_s: float,
             min_age_s: float) -> list[Due]:
    """The conversation's sealed windows at least `min_age_s` old and not backing off (forgetting the attempts of
    windows no longer sealed)."""
    retries.keep(tenant, conversation_id, (tuple(w.seqs) for w in buffer.sealed))
    return [(tenant, conversation_id, w) for w in buffer.sealed
            if not retries.waiting((tenant, conversation_id, tuple(w.seqs)), now_s)
            and (now - w.sealed_at).total_seconds() >= min_age_s]


def isolate(batch: list[Due], retryable: bool, retries: Retries) -> bool:
    """Whether a failed batch is tried again window by window, so the one that fails does not hold back the others:
    at once for a failure retrying cannot fix, and for a retryable one once the same windows have failed together
    twice (a dependency that is down fails them one by one as fast; one that fails on one window alone holds back
    only that window)."""
    repeated = all(retries.attempts(window_key(due)) >= 2 for due in batch)
    return len(batch) > 1 and (not retryable or repeated)
