"""Long-term memory: one async Store interface over Qdrant Edge (embedded) and qdrant-client (server).

qdrant-client (about 0.9 s of imports) loads only when a server is configured or ClientStore is asked for: a process
on the embedded default never needs it.
"""
from typing import TYPE_CHECKING, Any

from shared.settings import Settings
from shared.store.edge import EdgeStore
from shared.store.model import (
    Boost,
    Condition,
    EntryFilter,
    HybridSearch,
    MemoryEntry,
    Page,
    Read,
    Scope,
    ScoredEntry,
    SparseVector,
    StoredEntry,
    TimeRead,
    TurnLines,
    VectorRead,
    Vectors,
    entry_id,
)
from shared.store.paging import all_entries, pages
from shared.store.protocol import Store

if TYPE_CHECKING:
    from shared.store.remote import ClientStore

__all__ = ["Boost", "ClientStore", "Condition", "EdgeStore", "EntryFilter", "HybridSearch", "MemoryEntry", "Page",
           "Read", "Scope", "ScoredEntry", "SparseVector", "Store", "StoredEntry", "TimeRead", "TurnLines",
           "VectorRead", "Vectors", "all_entries", "entry_id", "open_store", "pages"]


async def open_store(settings: Settings, dense_dim: int) -> Store:
    """The live build the settings name: the ENGRAM_COLLECTION alias on a Qdrant server at qdrant_url, else Qdrant
    Edge in data_dir (see shared/store/builds.py)."""
    from shared.store.builds import open_live

    return await open_live(settings, dense_dim)


def __getattr__(name: str) -> Any:
    if name == "ClientStore":
        from shared.store.remote import ClientStore

        return ClientStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
