"""The Embedder protocol every dense embedder (offline model or remote endpoint) implements."""
from collections.abc import Sequence
from typing import Protocol

WARM_UP_TIMEOUT_S = 120.0  # the longest a service waits at start-up for its model or endpoint to answer once


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
