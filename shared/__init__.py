"""Code every engram service uses: contract, settings, store, embedding, compression, retrieval."""
