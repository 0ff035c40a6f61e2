"""The offline summary of older turns: extractive, one clipped line per turn, the least informative lines dropped
first when the summary outgrows its word limit (the model's summary replaces it when one is configured)."""
from engram_client.contract import Turn
from shared.compress.extract import STOPWORDS
from shared.text import patterns, scripts

_SENTENCE_END = patterns.compile(r"(?<=[.!?。！？])\s*+")
_WORD = patterns.compile(r"[A-Za-zÀ-ÿ0-9][A-Za-zÀ-ÿ0-9'-]*+|[\u4e00-\u9fff]")
LINE_WORDS = 30


def _words(text: str) -> float:
    return scripts.approximate_words(text)


def _first_sentence(text: str) -> str:
    parts = [p for p in _SENTENCE_END.split(text.strip().replace("\n", " ")) if p.strip()]
    first = parts[0] if parts else text.strip()
    words = first.split(" ")
    return " ".join(words[:LINE_WORDS]) + ("…" if len(words) > LINE_WORDS else "")


def _information(line: str) -> float:
    """Names, numbers and content words per line: what a summary must not lose first."""
    tokens = _WORD.findall(line)
    content = [t for t in tokens if t.lower() not in STOPWORDS]
    names = sum(1 for t in tokens[1:] if t[:1].isupper())
    digits = sum(1 for t in tokens if any(c.isdigit() for c in t))
    return len(content) + 2 * names + 2 * digits


def extractive(previous: str, turns: list[Turn], max_words: int) -> str:
    """`previous` with a dated line per turn added; the least informative lines go while over `max_words`."""
    lines = [line for line in previous.split("\n") if line.strip()]
    lines += [f"{t.ts.date().isoformat()} {t.speaker}: {_first_sentence(t.text)}" for t in turns if t.text.strip()]
    while len(lines) > 1 and sum(_words(line) for line in lines) > max_words:
        weakest = min(range(len(lines)), key=lambda i: (_information(lines[i]), i))
        lines.pop(weakest)
    return "\n".join(lines)
