"""The OpenAI-compatible embedder, exercised through the real openai client against a local fake server."""
from collections.abc import Iterator

import pytest

from engram_client.errors import Unavailable
from shared.embedding import OpenAIEmbedder, open_embedder
from shared.settings import Settings
from tests.fakes.openai_server import FakeOpenAI, fake_vector, norm, serve


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with serve() as state:
        yield state


async def test_batches_orders_and_normalises(fake: FakeOpenAI) -> None:
    """Passages are sent in batches of embed_batch_size with the configured model and dimensions, and come back in
    input order as unit vectors."""
    settings = Settings(embedder="openai", openai_base_url=fake.url, openai_api_key="k", embedding_dimensions=16,
                        embed_batch_size=3, embedding_model="emb-small")
    embedder = open_embedder(settings)
    assert isinstance(embedder, OpenAIEmbedder)
    texts = [f"text number {i}" for i in range(7)]
    vectors = await embedder.passages(texts)
    await embedder.close()
    assert len(vectors) == 7 and all(len(v) == 16 for v in vectors)
    assert all(abs(norm(v) - 1.0) < 1e-9 for v in vectors)
    expected = fake_vector("text number 4", 16)
    assert vectors[4] == pytest.approx([x / norm(expected) for x in expected])
    assert [len(r["body"]["input"]) for r in fake.requests] == [3, 3, 1]
    assert {r["body"]["model"] for r in fake.requests} == {"emb-small"}
    assert {r["body"]["dimensions"] for r in fake.requests} == {16}


async def test_server_errors_become_unavailable(fake: FakeOpenAI) -> None:
    """A 503 from the embeddings endpoint raises Unavailable naming the status."""
    fake.fail_with = 503
    settings = Settings(embedder="openai", openai_base_url=fake.url, openai_api_key="k", embedding_dimensions=8)
    embedder = open_embedder(settings)
    with pytest.raises(Unavailable, match="503"):
        await embedder.queries(["hello"])
    await embedder.close()


async def test_wrong_dimensions_are_refused(fake: FakeOpenAI) -> None:
    """Vectors of a size other than the configured one are refused as Unavailable naming the size received."""
    from openai import AsyncOpenAI

    embedder = OpenAIEmbedder(AsyncOpenAI(base_url=fake.url, api_key="k"), "m", dim=8)
    fake.embeddings = lambda body: FakeOpenAI.embeddings(fake, {**body, "dimensions": 4})  # type: ignore[method-assign]
    with pytest.raises(Unavailable, match="4-d vectors"):
        await embedder.queries(["hello"])
    await embedder.close()
