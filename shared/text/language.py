"""Which language a text is in, among those the BM25 tokenizer has stopwords and stemmers for."""
import functools

from py3langid.langid import MODEL_FILE, LanguageIdentifier

from shared.text.scripts import is_cjk

# ISO 639-1 code -> qdrant_edge Bm25Config language name (the languages with stopwords and a stemmer).
BM25_LANGUAGES = {
    "ar": "arabic", "az": "azerbaijani", "eu": "basque", "bn": "bengali", "ca": "catalan", "zh": "chinese",
    "da": "danish", "nl": "dutch", "en": "english", "fi": "finnish", "fr": "french", "de": "german", "el": "greek",
    "he": "hebrew", "hu": "hungarian", "id": "indonesian", "it": "italian", "ja": "japanese", "kk": "kazakh",
    "ne": "nepali", "no": "norwegian", "pt": "portuguese", "ro": "romanian", "ru": "russian", "sl": "slovene",
    "es": "spanish", "sv": "swedish", "tg": "tajik", "tr": "turkish",
}
_ISO_CODES = {name: code for code, name in BM25_LANGUAGES.items()}
# Below this many letters a guess is noise ("Yes, twice!"), so the caller's fallback wins.
MIN_LETTERS = 12


@functools.cache
def _identifier() -> LanguageIdentifier:
    # The model ships inside the py3langid wheel; nothing is downloaded.
    ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    ident.set_languages(sorted(BM25_LANGUAGES))
    return ident


@functools.lru_cache(maxsize=4096)  # recall asks twice per query (planning, BM25 terms)
def detect(text: str, fallback: str = "english", min_confidence: float = 0.6) -> str:
    """The Bm25 language name of `text`, or `fallback` when the text is too short or the guess unsure."""
    letters = sum(1 for c in text if c.isalpha())
    cjk = sum(1 for c in text if is_cjk(c))
    # CJK characters carry a word each, so a handful is enough to tell.
    if letters < MIN_LETTERS and cjk < 2:
        return fallback
    code, confidence = _identifier().classify(text)
    if confidence < min_confidence:
        return fallback
    return BM25_LANGUAGES.get(code, fallback)


def iso_code(bm25_language: str) -> str:
    """The ISO 639-1 code of a Bm25 language name ("chinese" -> "zh"); "en" for a name it does not know."""
    return _ISO_CODES.get(bm25_language, "en")


def detect_iso(text: str, fallback: str = "english") -> str:
    """The ISO 639-1 code of `text`'s language (what date parsing and rendering switch on)."""
    return iso_code(detect(text, fallback))
