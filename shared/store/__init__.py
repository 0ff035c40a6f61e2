"""Long-term memory: one async Store interface over Qdrant Edge (embedded) and qdrant-client (server)."""
from pathlib import Path

from qdrant_client import AsyncQdrantClient

from shared.security import qdrant_options
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
    """The store the settings name: a Qdrant server at qdrant_url, else Qdrant Edge in data_dir/qdrant."""
    if settings.qdrant_url:
        client = AsyncQdrantClient(url=settings.qdrant_url, **qdrant_options(settings))
        return await ClientStore.open(client, settings.collection, dense_dim)
    return EdgeStore.open(Path(settings.qdrant_path), dense_dim)
