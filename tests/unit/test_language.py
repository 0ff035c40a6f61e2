"""Language detection picks the BM25 analysis; short or unsure text falls back."""
from shared.embedding import Bm25Encoder
from shared.text.language import detect


def test_languages_are_detected() -> None:
    assert detect("I went to a support group yesterday and it was powerful") == "english"
    assert detect("我昨天去了北京的咖啡馆") == "chinese"
    assert detect("Ich bin gestern mit dem Zug nach Berlin gefahren") == "german"


def test_short_text_falls_back() -> None:
    assert detect("Yes, twice!") == "english"
    assert detect("Oui", fallback="french") == "french"


def test_query_terms_match_document_terms_across_inflections() -> None:
    bm25 = Bm25Encoder()
    doc = set(bm25.document("Caroline researched adoption agencies").indices)
    query = set(bm25.query("What did Caroline research?").indices)
    assert len(doc & query) >= 2  # caroline + research (stemmed), stopwords dropped


def test_chinese_text_is_tokenized_into_words() -> None:
    bm25 = Bm25Encoder()
    doc = set(bm25.document("我昨天去了北京的咖啡馆").indices)
    assert set(bm25.query("北京咖啡馆").indices) <= doc
