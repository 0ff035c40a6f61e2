"""Code every engram service uses: settings, store, embedding, compression, retrieval (the wire contract is
engram_client's)."""
