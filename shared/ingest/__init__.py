"""Ingest: turns into working-memory buffers, windows sealed and closed, entries written (no broker in sight)."""
