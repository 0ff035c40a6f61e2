"""The offline text work of windows (the compressor's dating and extraction, the fact rules), in worker processes
with a budget of CPU time per window.

Python's `re`, dateparser and the rules hold the interpreter lock for as long as they run, so a thread cannot stop
them and an input they take too long on freezes the whole process (health checks, acknowledgements, every
tenant's recall). In a worker process they run beside the event loop, and a window whose work exceeds the budget
has its worker killed and replaced (pebble's process pool): the window is stored all the same, as plain dated lines
without the derived parts (plain.py), counted in `engram_text_budget_exceeded_total{work}` and logged by
conversation id and turn count, never by text.

The budget counts the CPU the window's work uses, not the time it waits for a core: the workers run at the lowest
CPU priority (like the passage model, so that ingest never slows recall down), and a window that waits while recall
is busy is not cut short for it. The kernel enforces it (an ITIMER_PROF timer whose signal ends the worker, whatever
it holds); a wall-clock limit of WALL_FACTOR times the budget stops a worker that neither runs nor ends.
"""
import asyncio
import contextlib
import logging
import multiprocessing
import os
import resource
import signal
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Literal

from pebble import ProcessExpired, ProcessPool
from pydantic import TypeAdapter

from shared.compress.model import Draft, Window
from shared.compress.plain import plain_episode
from shared.runtime import metrics

log = logging.getLogger("engram.compress")
Work = Literal["compress", "facts"]
_DRAFTS = TypeAdapter(list[Draft])
PRELOAD = ["shared.compress.offline", "shared.compress.facts"]  # what every worker needs, loaded once
WORKER_NICE = 19  # the lowest CPU priority: recall's queries go first
WALL_FACTOR = 6.0  # a worker still at it after this many times its CPU budget, on the clock, is stopped too


def _start_worker() -> None:
    """In a new worker: the lowest CPU priority, and no core file when the budget's signal ends it."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, WORKER_NICE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@contextlib.contextmanager
def _cpu_budget(budget_s: float) -> Iterator[None]:
    """The kernel ends this process (SIGPROF, left at its default action) once the block has used `budget_s` of CPU."""
    signal.setitimer(signal.ITIMER_PROF, budget_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def _compress(budget_s: float, window: str, context_chars: int, language: str) -> bytes:
    """In a worker: the offline compressor's entry for the window (JSON in, JSON out: nothing is pickled)."""
    from shared.compress.offline import OfflineCompressor

    with _cpu_budget(budget_s):
        drafts = OfflineCompressor(context_chars, language).compress_sync(Window.model_validate_json(window))
    return _DRAFTS.dump_json(drafts)


def _facts(budget_s: float, window: str) -> bytes:
    """In a worker: the facts the rules read in the window."""
    from shared.compress.facts import RuleFactExtractor

    with _cpu_budget(budget_s):
        drafts = RuleFactExtractor().extract_sync(Window.model_validate_json(window))
    return _DRAFTS.dump_json(drafts)


class TextWorkers:
    """A pool of worker processes for windows' text work, each call within `budget_s` of CPU."""

    def __init__(self, workers: int, budget_s: float, context_chars: int = 160, language: str = "english") -> None:
        # Forked from a fork server that has the rules loaded (started once per process, single-threaded): a fork of
        # this process, with its model and event-loop threads, would not be safe, and a spawn imports the rules
        # again for every worker (about a second of CPU each).
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        self._pool = ProcessPool(max_workers=workers, context=context, initializer=_start_worker)
        self.budget_s = budget_s
        self._context_chars = context_chars
        self._language = language

    async def _run(self, work: Work, window: Window, *args: object) -> list[Draft] | None:
        function = _compress if work == "compress" else _facts
        future: Future[bytes] = self._pool.schedule(
            function, args=(self.budget_s, window.model_dump_json(), *args), timeout=WALL_FACTOR * self.budget_s)
        try:
            answer: bytes = await asyncio.wrap_future(future)
            return _DRAFTS.validate_json(answer)
        except ProcessExpired as ended:
            if ended.exitcode != -signal.SIGPROF:
                raise  # the worker died of something else: the window's attempt fails, and is counted
            over = f"used its {self.budget_s:g} s of CPU"
        except (TimeoutError, FutureTimeout):
            over = f"ran for {WALL_FACTOR * self.budget_s:g} s"
        metrics.text_budget_exceeded_total.labels(work).inc()
        log.warning("the %s work of a window of conversation %r (%d turns) %s; its worker was stopped", work,
                    window.conversation_id, len(window.turns), over)
        return None

    async def compress(self, window: Window) -> list[Draft]:
        """The offline compressor's entry for the window; plain dated lines if it runs past the budget."""
        drafts = await self._run("compress", window, self._context_chars, self._language)
        return drafts if drafts is not None else [plain_episode(window)]

    async def facts(self, window: Window) -> list[Draft]:
        """The facts the rules read in the window; none if they run past the budget."""
        drafts = await self._run("facts", window)
        return drafts if drafts is not None else []

    def close(self) -> None:
        """Stop the workers (a window's work in progress is abandoned: the window stays sealed, written later)."""
        self._pool.stop()  # type: ignore[no-untyped-call]
        self._pool.join(timeout=10)


class BudgetedCompressor:
    """The offline compressor, run by the workers within their budget (a `Compressor`)."""

    statements_per_window = 0

    def __init__(self, workers: TextWorkers) -> None:
        self._workers = workers

    async def compress(self, window: Window) -> list[Draft]:
        """The window as one entry (plain lines past the budget)."""
        return await self._workers.compress(window)


class BudgetedRules:
    """The fact rules, run by the workers within their budget (a `FactExtractor`)."""

    def __init__(self, workers: TextWorkers) -> None:
        self._workers = workers

    async def extract(self, window: Window) -> list[Draft]:
        """Facts stated in the window's turns (none past the budget)."""
        return await self._workers.facts(window)
