"""Writing an episode again without one person's turns: the deployment's own compressor and embedders, opened on
first use (a consolidator needs them only when a forget finds that person's words in an episode someone else owns).
"""
from dataclasses import dataclass

from shared.compress import Window
from shared.compress.choose import compression
from shared.compress.model import Draft
from shared.embedding import EMBED_CHARS, Bm25Encoder, OnDemandEmbedder
from shared.llm import LlmClient
from shared.settings import Settings
from shared.store import Vectors


@dataclass(frozen=True)
class Episode:
    """What the compressor made of a window, with both vectors of its text."""

    draft: Draft
    vectors: Vectors


@dataclass
class Rederive:
    """The compressor and embedders the ingestors use, for a forget's rewrites (the dense embedder opened on first
    use, shared with the replica's imports)."""

    settings: Settings
    embedder: OnDemandEmbedder
    llm: LlmClient | None = None

    async def episode(self, window: Window) -> Episode | None:
        """The window's episode as the ingestor would write it (None if the compressor makes none)."""
        compressor, _ = compression(self.settings, self.llm)
        drafts = [d for d in await compressor.compress(window) if d.kind == "episodic"]
        if not drafts:
            return None
        draft = drafts[0]
        sparse = Bm25Encoder(self.settings.bm25_language)
        dense = (await self.embedder.get().passages([draft.text[:EMBED_CHARS]]))[0]
        return Episode(draft=draft, vectors=Vectors(dense=dense, sparse=sparse.document(draft.text)))
