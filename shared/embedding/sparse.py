"""Sparse BM25 vectors from qdrant_edge.Bm25: multilingual tokenizer, stopwords and stemmer of the text's language."""
import functools

import qdrant_edge as qe

from shared.store.model import SparseVector
from shared.text import language


@functools.cache
def _model(lang: str) -> qe.Bm25:
    return qe.Bm25(qe.Bm25Config(tokenizer=qe.TokenizerType.Multilingual, language=lang))


class Bm25Encoder:
    """BM25 term weights for documents, unit weights for queries; the store applies IDF."""

    def __init__(self, fallback_language: str = "english") -> None:
        self._fallback = fallback_language
        _model(fallback_language)  # fail at startup, not on the first message, if the language is unknown

    def document(self, text: str, lang: str | None = None) -> SparseVector:
        """Term-frequency weights of a stored text, analysed in its own language (detected unless given)."""
        vec = _model(lang or language.detect(text, self._fallback)).embed_document(text)
        return SparseVector(indices=list(vec.indices), values=list(vec.values))

    def query(self, text: str) -> SparseVector:
        """Query terms analysed in the query's language and in the fallback language.

        A short query's language guess is unreliable, and a term stemmed the wrong way would miss every
        document; the union keeps both analyses (terms no document has cost nothing).
        """
        weights: dict[int, float] = {}
        for lang in dict.fromkeys((language.detect(text, self._fallback), self._fallback)):
            vec = _model(lang).embed_query(text)
            weights.update(zip(vec.indices, vec.values, strict=True))
        return SparseVector(indices=list(weights), values=list(weights.values()))
