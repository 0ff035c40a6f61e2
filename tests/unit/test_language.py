"""Language detection picks the BM25 analysis; short or unsure text falls back."""
from shared.embedding import Bm25Encoder
from shared.text.language import detect


def test_languages_are_detected() -> None:
    """English, Chinese and German sentences are detected as their languages."""
    assert detect("I went to a support group yesterday and it was powerful") == "english"
    assert detect("我昨天去了北京的咖啡馆") == "chinese"
    assert detect("Ich bin gestern mit dem Zug nach Berlin gefahren") == "german"


def test_short_text_falls_back() -> None:
    """Text too short to tell is given the fallback language: English unless the caller names another."""
    assert detect("Yes, twice!") == "english"
    assert detect("Oui", fallback="french") == "french"


def test_query_terms_match_document_terms_across_inflections() -> None:
    """BM25 stems words and drops stopwords, so a question shares the name and the stem of an inflected verb with a
    document."""
    bm25 = Bm25Encoder()
    doc = set(bm25.document("Caroline researched adoption agencies").indices)
    query = set(bm25.query("What did Caroline research?").indices)
    assert len(doc & query) >= 2  # caroline + research (stemmed), stopwords dropped


def test_chinese_text_is_tokenized_into_words() -> None:
    """Unspaced Chinese is segmented into words, so a query's words are among the terms of a document containing
    them."""
    bm25 = Bm25Encoder()
    doc = set(bm25.document("我昨天去了北京的咖啡馆").indices)
    assert set(bm25.query("北京咖啡馆").indices) <= doc
