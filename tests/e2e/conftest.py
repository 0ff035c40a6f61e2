"""End-to-end fixtures: a real nats-server (from the wheel), the services, Qdrant Edge, and the client SDK."""
import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from services.stack import Running, running
from shared.client import MemoryClient
from shared.messaging import nats_server
from shared.settings import Settings
from tests.conftest import unique

T = TypeVar("T")


async def eventually(probe: Callable[[], Awaitable[T]], check: Callable[[T], bool] = bool,
                     timeout_s: float = 20.0, interval_s: float = 0.1) -> T:
    """Poll `probe` until `check` passes on its result, or fail after `timeout_s` with the last result."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while True:
        last = await probe()
        if check(last):
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s; last result: {last!r}"[:2000])
        await asyncio.sleep(interval_s)


@pytest.fixture
def nats_url(tmp_path: Path) -> Iterator[str]:
    """A fresh nats-server with JetStream on a free port, storing in tmp_path."""
    server = nats_server.start(tmp_path / "nats")
    yield server.url
    server.stop()


@pytest.fixture
def e2e_settings(tmp_path: Path) -> Settings:
    """Settings for a fast stack: short sweeps and grace so tests need not wait long."""
    return Settings(data_dir=tmp_path / "data", http_port=0, sweep_interval_s=0.2, seal_grace_s=1.0,
                    idle_timeout_s=2.0)


@pytest.fixture
async def stack(e2e_settings: Settings, nats_url: str) -> AsyncIterator[Running]:
    """One ingestor and one retriever against the test's nats-server."""
    async with running(e2e_settings, nats_url=nats_url) as state:
        yield state


@pytest.fixture
async def client(stack: Running) -> AsyncIterator[MemoryClient]:
    """A client SDK for a fresh tenant."""
    async with await MemoryClient.connect(stack.nats_url, unique("tenant")) as memory_client:
        yield memory_client
