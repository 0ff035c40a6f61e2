"""engram's benchmarks: ingest efficiency, recall overhead over the floor, and scale (`make bench`)."""
