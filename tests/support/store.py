"""Stored entries built by hand for the store's own tests, and a Qdrant server that never answers."""
import contextlib
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.store import MemoryEntry, SparseVector, StoredEntry, Vectors, entry_id

T0 = datetime(2023, 5, 8, 12, 0, tzinfo=UTC)


def item(tenant: str, turns: list[str], *, dense: list[float], terms: list[int], conversation: str = "c1",
         user: str | None = "u1", days: int = 0, weights: list[float] | None = None, **payload: Any) -> StoredEntry:
    """An entry of `tenant` over `turns` with the given vectors (`terms` are sparse indices), `days` after T0."""
    entry = MemoryEntry(id=entry_id(tenant, conversation, turns), tenant_id=tenant, user_id=user,
                        conversation_id=conversation, text=payload.pop("text", f"entry {turns}"),
                        occurred_at=T0 + timedelta(days=days), created_at=T0, updated_at=T0, source_turn_ids=turns,
                        **payload)
    return StoredEntry(entry=entry, vectors=Vectors(dense=dense, sparse=SparseVector(
        indices=terms, values=weights or [1.0] * len(terms))))


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung Qdrant server): requests wait for their timeout."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)  # the kernel completes the handshakes; nothing ever reads or replies
        yield int(sock.getsockname()[1])
