"""A dense embedder opened on first use: a consolidator replica has none of its own (its jobs reuse stored vectors)
until a forget must write an episode again or an import must embed an entry, and then both share one."""
import threading
from collections.abc import Callable

from shared.embedding.protocol import Embedder


class OnDemandEmbedder:
    """The embedder `opener` makes, opened by the first `get` (from any thread or task) and closed with its owner."""

    def __init__(self, opener: Callable[[], Embedder]) -> None:
        self._opener = opener
        self._embedder: Embedder | None = None
        self._lock = threading.Lock()

    def get(self) -> Embedder:
        """The embedder, opened now if it was not yet."""
        with self._lock:
            if self._embedder is None:
                self._embedder = self._opener()
            return self._embedder

    async def close(self) -> None:
        """Close the embedder if one was opened."""
        with self._lock:
            embedder, self._embedder = self._embedder, None
        if embedder is not None:
            await embedder.close()
