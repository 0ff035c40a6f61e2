"""End-to-end fixtures: a real nats-server (from the wheel), the services, Qdrant Edge, and the client SDK."""
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from engram_client import MemoryClient
from services.stack import Running, running
from shared.messaging import nats_server
from shared.settings import Settings
from tests.support import image
from tests.support.ids import unique
from tests.support.stacks import fast_settings
from tests.support.xdist import is_worker

IMAGE_TEST = "test_image.py"
IMAGE_BUILD = pytest.StashKey[image.Background]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The image's build overlaps the other tests: run in one process, the image test runs last and the build starts
    in a thread when it is collected; on pytest-xdist workers it is handed out first, and its worker waits for the
    build while the others run the rest."""
    if not is_worker(config):  # on workers, tests/support/xdist.py's slow_first puts it first
        items.sort(key=lambda item: item.path.name == IMAGE_TEST)  # stable: the rest keep their order


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start building the image (in a thread, at low priority) as soon as its test is known to run (in one process;
    a pytest-xdist worker builds when it is handed the test)."""
    if (not session.config.option.collectonly and not is_worker(session.config)
            and any(item.path.name == IMAGE_TEST for item in session.items)):
        log = Path(tempfile.mkdtemp(prefix="engram-image-")) / "build.log"
        session.config.stash[IMAGE_BUILD] = image.start_background(log)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Remove the image test's container, even when the test never ran."""
    if IMAGE_BUILD in session.config.stash:
        session.config.stash[IMAGE_BUILD].finish()


@pytest.fixture(scope="module")
def image_build(request: pytest.FixtureRequest) -> Iterator[image.Background]:
    """The image built and its container started (skips, or fails under `make test` or as root, with no engine)."""
    build = request.config.stash.get(IMAGE_BUILD, None)
    if build is None:
        build = request.config.stash[IMAGE_BUILD] = image.start_background(
            Path(tempfile.mkdtemp(prefix="engram-image-")) / "build.log")
    if not build.done.wait(timeout=1500):
        pytest.fail(f"the image build has not finished in 25 minutes; see {build.log}")
    if build.unreachable is not None:
        if os.environ.get(image.REQUIRED) or os.geteuid() == 0:
            pytest.fail(build.unreachable)
        pytest.skip(build.unreachable)
    if build.error is not None:
        pytest.fail(f"building or starting the image failed: {build.error}")
    try:
        yield build
    finally:
        image.stop_container()


@pytest.fixture
def nats_url(tmp_path: Path) -> Iterator[str]:
    """A fresh nats-server with JetStream on a free port, storing in tmp_path."""
    server = nats_server.start(tmp_path / "nats")
    yield server.url
    server.stop()


@pytest.fixture
def e2e_settings(tmp_path: Path) -> Settings:
    """Fast settings for a stack of the test's own."""
    return fast_settings(tmp_path)


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Running]:
    """One ingestor and one retriever for the whole module (its tests use their own tenants), on its own
    nats-server; tests that need other settings, or break things, start their own."""
    folder = tmp_path_factory.mktemp("stack")
    server = nats_server.start(folder / "nats")
    try:
        async with running(fast_settings(folder), nats_url=server.url) as state:
            yield state
    finally:
        server.stop()


@pytest.fixture
async def client(stack: Running) -> AsyncIterator[MemoryClient]:
    """A client SDK for a fresh tenant."""
    async with await MemoryClient.connect(stack.nats_url, unique("tenant")) as memory_client:
        yield memory_client


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """A tracer provider for this process whose spans are kept in memory (each replica's consumer spans name its
    connection); removed afterwards, so other tests run with tracing off as engram does by default."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()
    # OpenTelemetry sets its global provider once per process; its own test utilities reset it the same way.
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
