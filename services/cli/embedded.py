"""The one helper that starts a throwaway embedded stack (NATS, Qdrant Edge, services) for commands that need one."""
import contextlib
import logging
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from services.stack import Running, running
from shared.settings import Settings


@contextlib.asynccontextmanager
async def embedded_stack(settings: Settings, purpose: str, **overrides: Any) -> AsyncIterator[Running]:
    """Run engram in a temporary folder, on free ports, for the block's duration; its data goes with it.

    Args:
        purpose: names the folder (engram-<purpose>-…).
        overrides: settings to change for this stack (e.g. a short idle timeout for the demo).
    """
    with tempfile.TemporaryDirectory(prefix=f"engram-{purpose}-") as folder:
        local = settings.model_copy(update={"data_dir": Path(folder), "nats_url": None, "nats_port": 0,
                                            "http_port": 0, **overrides})
        logging.getLogger().setLevel(max(logging.WARNING, logging.getLogger().level))  # the command tells its story
        async with running(local) as state:
            yield state
