"""Working memory: the turns engram still collects per conversation, in NATS key-value buckets every replica shares.

Ingest appends to it and closes windows from it, retrieval shows its recent turns and keeps running summaries in
it, consolidation's forget empties it, and a rebuild replays the stream through the same pure buffer transitions.
"""
from shared.working_memory.buckets import CachedSummary, WorkingMemory

__all__ = ["CachedSummary", "WorkingMemory"]
