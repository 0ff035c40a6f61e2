"""The ingestor service: turns and flushes in, entries out."""
