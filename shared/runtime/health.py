"""Readiness of one process: checks its parts register, and failures that must end the process."""
import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("engram.health")
ReadyCheck = Callable[[], Awaitable[str | None]]  # None when ready, else why not


class Health:
    """What /readyz reports. A part that dies for good calls `fail`, which also tells the process to exit."""

    def __init__(self) -> None:
        self._checks: list[ReadyCheck] = []
        self.fatal: str | None = None
        self.failed = asyncio.Event()

    def check(self, ready: ReadyCheck) -> None:
        """Add a readiness check."""
        self._checks.append(ready)

    def fail(self, reason: str) -> None:
        """Mark the process broken: /readyz answers 503 with `reason`, and whoever serves it exits non-zero."""
        if self.fatal is None:
            log.error("process is no longer able to work: %s", reason)
            self.fatal = reason
        self.failed.set()

    async def problem(self) -> str | None:
        """None if every part is ready, else the first reason it is not."""
        if self.fatal is not None:
            return self.fatal
        for ready in self._checks:
            reason = await ready()
            if reason:
                return reason
        return None

    def watch(self, task: "asyncio.Task[None]", what: str, stopping: asyncio.Event) -> None:
        """Fail the process if `task` ends (by error or not) before `stopping` is set."""

        def ended(done: "asyncio.Task[None]") -> None:
            if stopping.is_set():
                return
            error = None if done.cancelled() else done.exception()
            self.fail(f"{what} stopped: {type(error).__name__}: {error}" if error else f"{what} stopped")

        task.add_done_callback(ended)
