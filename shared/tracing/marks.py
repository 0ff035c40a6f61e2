"""The trace contexts of the turns a replica accepted and of the windows it sealed, so a window's spans join them.

A window is sealed by one message (its last turn, a flush) or by idleness, and holds several turns, each with its own
trace. Its `engram.window sealed` span is a child of the sealing message's span (none when sealed by idleness) and
links to every turn's accept span; the write of the window (compress, embed, upsert) is a child of that seal, so it
belongs to the trace of the turn or flush that closed the window.

Kept in this replica's memory only, bounded (oldest forgotten first): a window written by another replica (after a
crash, or past the grace period) or after a restart starts a trace of its own, without links. Empty while tracing is
off.
"""
from collections import OrderedDict
from collections.abc import Sequence
from typing import TypeVar

from opentelemetry.trace import SpanContext

from shared.tracing import spans

K = TypeVar("K")
MAX_MARKS = 20_000  # turns and windows remembered; far more than are open at once on one replica

TurnKey = tuple[str, str, int]                # (tenant, conversation id, stream sequence)
WindowKey = tuple[str, str, tuple[int, ...]]  # (tenant, conversation id, its turns' sequences)


class Marks:
    """Span contexts by turn and by window, the oldest dropped past `limit`."""

    def __init__(self, limit: int = MAX_MARKS) -> None:
        self._limit = limit
        self._turns: OrderedDict[TurnKey, SpanContext] = OrderedDict()
        self._windows: OrderedDict[WindowKey, SpanContext] = OrderedDict()

    def turn(self, tenant: str, conversation_id: str, seq: int, context: SpanContext) -> None:
        """Remember the context of the span that accepted this turn."""
        self._put(self._turns, (tenant, conversation_id, seq), context)

    def turns(self, tenant: str, conversation_id: str, seqs: Sequence[int]) -> list[SpanContext]:
        """The contexts remembered for these turns (those this replica accepted)."""
        found = (self._turns.get((tenant, conversation_id, s)) for s in seqs)
        return [c for c in found if c is not None]

    def sealed(self, tenant: str, conversation_id: str, seqs: Sequence[int], context: SpanContext) -> None:
        """Remember the context of the span that sealed this window."""
        self._put(self._windows, (tenant, conversation_id, tuple(seqs)), context)

    def seal_of(self, tenant: str, conversation_id: str, seqs: Sequence[int]) -> SpanContext | None:
        """The context of the span that sealed this window here, if any."""
        return self._windows.get((tenant, conversation_id, tuple(seqs)))

    def written(self, tenant: str, conversation_id: str, seqs: Sequence[int]) -> None:
        """Forget a window and its turns once it is written."""
        self._windows.pop((tenant, conversation_id, tuple(seqs)), None)
        for seq in seqs:
            self._turns.pop((tenant, conversation_id, seq), None)

    def accepted(self, tenant: str, conversation_id: str, seq: int, sealed: Sequence[Sequence[int]]) -> None:
        """Within the span that accepted message `seq` (a turn or a flush): remember it, and open the seal span of
        each sealed window not sealed here before (the ones this message sealed). Nothing with tracing off."""
        if (accepting := spans.current()) is None:
            return
        self.turn(tenant, conversation_id, seq, accepting)
        for seqs in sealed:
            if self.seal_of(tenant, conversation_id, seqs) is None:
                self.seal(tenant, conversation_id, seqs, "message")

    def seal(self, tenant: str, conversation_id: str, seqs: Sequence[int], reason: str) -> None:
        """Record the sealing of a window: a span (child of the one in progress, if any) linked to each of its turns'
        accept spans, remembered as the parent of the window's write."""
        with spans.span("engram.window sealed", links=self.turns(tenant, conversation_id, seqs), attributes={
                "engram.tenant": tenant, "engram.conversation_id": conversation_id, "engram.window.turns": len(seqs),
                "engram.window.sealed_by": reason}) as opened:
            if opened is not None:
                self.sealed(tenant, conversation_id, seqs, opened.get_span_context())

    def _put(self, into: "OrderedDict[K, SpanContext]", key: K, context: SpanContext) -> None:
        into[key] = context
        into.move_to_end(key)
        while len(into) > self._limit:
            into.popitem(last=False)
