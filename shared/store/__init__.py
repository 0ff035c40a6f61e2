"""Long-term memory: one async Store interface over Qdrant Edge (embedded) and qdrant-client (server)."""


from shared.settings import Settings
from shared.store.edge import EdgeStore
from shared.store.model import (
    Boost,
    Condition,
    EntryFilter,
    HybridSearch,
    MemoryEntry,
    Page,
    Scope,
    ScoredEntry,
    SparseVector,
    StoredEntry,
    Vectors,
    entry_id,
)
from shared.store.paging import all_entries, pages
from shared.store.protocol import Store
from shared.store.remote import ClientStore

__all__ = ["Boost", "ClientStore", "Condition", "EdgeStore", "EntryFilter", "HybridSearch", "MemoryEntry", "Page",
           "Scope", "ScoredEntry", "SparseVector", "Store", "StoredEntry", "Vectors", "all_entries", "entry_id",
           "open_store", "pages"]


async def open_store(settings: Settings, dense_dim: int) -> Store:
    """The live build the settings name: the ENGRAM_COLLECTION alias on a Qdrant server at qdrant_url, else Qdrant
    Edge in data_dir (see shared/store/builds.py)."""
    from shared.store.builds import open_live

    return await open_live(settings, dense_dim)
