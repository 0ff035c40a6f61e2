"""Any OpenAI-compatible `/embeddings` endpoint through the official client."""
import time
from collections.abc import Sequence

import numpy as np
from openai import APIConnectionError, APIStatusError, APITimeoutError, AsyncOpenAI

from engram_client.errors import Timeout, Unavailable
from shared.runtime import metrics


class OpenAIEmbedder:
    """Embeds through an OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp's server...)."""

    def __init__(self, client: AsyncOpenAI, model: str, dim: int, batch_size: int = 64) -> None:
        self._client = client
        self._model = model
        self.dim = dim
        self._batch = batch_size

    async def _embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch):
            chunk = list(texts[start:start + self._batch])
            started = time.perf_counter()
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
            metrics.embed_seconds.labels(kind).observe(time.perf_counter() - started)
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
        return await self._embed(texts, "passage")

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of search queries."""
        return await self._embed(texts, "query")

    def problem(self) -> str | None:
        """None: an endpoint's outages show per call (as `unavailable`), not as a broken embedder."""
        return None

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._client.close()
