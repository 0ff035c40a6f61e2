"""The one helper that starts a throwaway embedded stack (NATS, Qdrant Edge, services) for commands that need one."""
import asyncio
import contextlib
import logging
import signal
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from services.cli.base import Terminated
from services.stack import Running, running
from shared.settings import Settings


@contextlib.asynccontextmanager
async def embedded_stack(settings: Settings, purpose: str, **overrides: Any) -> AsyncIterator[Running]:
    """Run engram in a temporary folder, on free ports, for the block's duration; its data goes with it, also when
    SIGTERM stops the command (see `stopped_by_sigterm`).

    Args:
        purpose: names the folder (engram-<purpose>-…).
        overrides: settings to change for this stack (e.g. a short idle timeout for the demo).
    """
    async with stopped_by_sigterm():
        with tempfile.TemporaryDirectory(prefix=f"engram-{purpose}-") as folder:
            local = settings.model_copy(update={"data_dir": Path(folder), "nats_url": None, "nats_port": 0,
                                                "http_port": 0, **overrides})
            logging.getLogger().setLevel(max(logging.WARNING, logging.getLogger().level))  # the command tells it
            async with running(local) as state:
                yield state


@contextlib.asynccontextmanager
async def stopped_by_sigterm() -> AsyncIterator[None]:
    """Within the block, SIGTERM cancels the task running it, once, as Ctrl-C would: what the block started (a
    nats-server in its own session, a temporary folder) is stopped and removed on the way out rather than left
    behind, and the block ends in `Terminated`. A second SIGTERM, then or after, is ignored: it cannot cut the clean-up
    short, nor kill the command before it exits with 143."""
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("stopped_by_sigterm needs a running task")
    loop = asyncio.get_running_loop()
    signalled = False

    def terminate() -> None:
        nonlocal signalled
        if not signalled:
            signalled = True
            task.cancel()

    loop.add_signal_handler(signal.SIGTERM, terminate)
    try:
        yield
    except asyncio.CancelledError:
        if not signalled:
            raise
        task.uncancel()
        raise Terminated("terminated (SIGTERM); the embedded engram it started has been stopped") from None
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        if signalled:  # the command is on its way out: a second SIGTERM must not kill it before it exits 143
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
